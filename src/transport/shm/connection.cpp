#include "transport/shm/connection.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/errors.h"
#include "core/logging.h"
#include "transport/shm/region.h"
#include "transport/shm/ring_plan.h"
#include "transport/shm/transport.h"

namespace strata::transport::shm {
namespace {

constexpr size_t kLinkHeaderBytes = 16;
// A wait spins this long before it yields or sleeps on the doorbell: a small message's reply
// usually lands within microseconds, far cheaper than a futex sleep and wakeup.
constexpr std::chrono::microseconds kLinkSpin{20};
constexpr int64_t kLinkLivenessUs = 1000;

// Copies the op's next `count` stream bytes (header first, then payload; from
// op->transferred on) between its memory and the ring, where they sit from stream position
// `position` on: into the ring for a send, out of it for a receive.
void copyStream(ShmOp* op, uint8_t* ring, size_t ringBytes, uint64_t position, size_t count) {
  auto* header = reinterpret_cast<uint8_t*>(op->header);
  for (size_t done = op->transferred; count > 0;) {
    const bool inHeader = done < kLinkHeaderBytes;
    uint8_t* at = inHeader ? header + done : op->data + (done - kLinkHeaderBytes);
    const size_t n = inHeader ? std::min(count, kLinkHeaderBytes - done) : count;
    size_t copied = 0;
    for (const RingPiece& p : ringPieces(position, n, ringBytes)) {
      if (op->kind == ShmOp::Kind::kSend) {
        std::memcpy(ring + p.offset, at + copied, p.length);
      } else {
        std::memcpy(at + copied, ring + p.offset, p.length);
      }
      copied += p.length;
    }
    position += n;
    done += n;
    count -= n;
  }
}

const char* linkVerb(ShmOp::Kind kind) { return kind == ShmOp::Kind::kSend ? "send" : "recv"; }

int64_t nowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// ----- ShmOp -----------------------------------------------------------------------

ShmOp::ShmOp(std::shared_ptr<ConnectionCore> core, Kind kind, void* data, size_t numBytes, uint64_t tag)
    : kind(kind), data(static_cast<uint8_t*>(data)), numBytes(numBytes), tag(tag), header{tag, numBytes},
      core_(std::move(core)) {}

ShmOp::~ShmOp() {
  if (!done()) core_->abandon(this);
  std::lock_guard<std::mutex> lock(mu_);  // a completer may still be storing the state
}

void ShmOp::complete() {
  std::lock_guard<std::mutex> lock(mu_);
  state_.store(kDone, std::memory_order_release);
}

void ShmOp::completeWithError(Failure failure) {
  std::lock_guard<std::mutex> lock(mu_);
  failure_ = std::move(failure);
  state_.store(kFailed, std::memory_order_release);
}

void ShmOp::wait(std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout;
  const auto spinUntil = start + kLinkSpin;
  // Then, for the core's yield window, it keeps the core but gives it to any other runnable
  // thread of this process (sched_yield), and only then sleeps: a sleeping waiter's wakeup
  // costs far more than the spin (ring_plan.h, p2pYieldUs).
  const auto yieldUntil = start + std::max(kLinkSpin, core_->yieldWindow());
  while (!done()) {
    const uint32_t seen = core_->bellValue();
    if (core_->progress(kind, /*wait=*/true) || done()) continue;
    core_->checkPeer();
    if (done()) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) throwTimeout(timeout);
    if (now < spinUntil) {
      cpuRelax();
      continue;
    }
    if (now < yieldUntil) {
      sched_yield();
      continue;
    }
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
    core_->sleepOnBell(seen, std::min(left + std::chrono::microseconds(1), kLinkSleep));
  }
  if (state_.load(std::memory_order_acquire) == kFailed) throwFailure();
}

void ShmOp::throwTimeout(std::chrono::milliseconds timeout) const {
  const char* dir = kind == Kind::kSend ? "send to" : "recv from";
  STRATA_THROW(TimeoutError, "shm ", dir, " rank ", core_->peer(), " timed out after ", timeout.count(), " ms (",
               numBytes, " bytes tag ", tag, ")");
}

void ShmOp::throwFailure() const {
  const int peer = core_->peer();
  const std::string during = c10::str(" during ", linkVerb(kind), " of ", numBytes, " bytes tag ", tag);
  switch (failure_.kind) {
    case FailKind::kMismatch:
      STRATA_THROW(MismatchError, "shm recv from rank ", peer, ": message mismatch: expected tag ", tag, " with ",
                   numBytes, " bytes, the peer sent tag ", failure_.gotTag, " with ", failure_.gotBytes,
                   " bytes (the ranks posted different sends and receives)");
    case FailKind::kPeerDied:
      STRATA_THROW(NetworkError, "shm link to rank ", peer, " broken: ", failure_.detail, during);
    case FailKind::kAfterMismatch:
      STRATA_THROW(NetworkError, "shm link to rank ", peer, " unusable after an earlier message mismatch", during);
    case FailKind::kClosedLocally:
      STRATA_THROW(NetworkError, "shm link to rank ", peer, " closed locally (", failure_.detail, ")", during);
    case FailKind::kPeerClosed: {
      const std::string text = c10::str("rank ", peer, " closed the connection", during, ": ", failure_.detail);
      if (failure_.peerReason == CloseReason::kMismatch) STRATA_THROW(MismatchError, text);
      if (failure_.peerReason == CloseReason::kTimeout) STRATA_THROW(TimeoutError, text);
      STRATA_THROW(NetworkError, text);
    }
    case FailKind::kAbandoned:
    case FailKind::kNone: break;
  }
  STRATA_THROW(NetworkError, "shm link to rank ", peer, " failed", during, ": ", failure_.detail);
}

// ----- ConnectionCore ---------------------------------------------------------------------

ConnectionCore::ConnectionCore(std::shared_ptr<Region> region, int peer, pid_t peerPid, Ring* out, uint8_t* outData,
                         Ring* in, uint8_t* inData, size_t ringBytes, Bell* myBell, Bell* peerBell,
                         std::chrono::microseconds yield)
    : region_(std::move(region)), peer_(peer), peerPid_(peerPid), out_(out), outData_(outData), in_(in), inData_(inData), ringBytes_(ringBytes),
      chunkBytes_(p2pChunkBytes(ringBytes)), myBell_(myBell), peerBell_(peerBell), yield_(yield) {}

void ConnectionCore::post(ShmOp* op) {
  Step step = Step::kIdle;
  {
    std::lock_guard<std::mutex> lock(op->kind == ShmOp::Kind::kSend ? sendMu_ : recvMu_);
    if (failed_.load(std::memory_order_acquire)) {
      op->completeWithError(failureForOp());
      return;
    }
    auto& queue = op->kind == ShmOp::Kind::kSend ? sendQueue_ : recvQueue_;
    queue.push_back(op);
    op->queued = true;
    if (queue.size() == 1) step = op->kind == ShmOp::Kind::kSend ? progressSend() : progressRecv();
  }
  if (step == Step::kFailed) failAll();
}

bool ConnectionCore::progress(ShmOp::Kind kind, bool wait) {
  std::mutex& mu = kind == ShmOp::Kind::kSend ? sendMu_ : recvMu_;
  std::unique_lock<std::mutex> lock(mu, std::defer_lock);
  if (wait) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return false;
  }
  const Step step = kind == ShmOp::Kind::kSend ? progressSend() : progressRecv();
  lock.unlock();
  if (step == Step::kFailed) failAll();
  return step != Step::kIdle;
}

bool ConnectionCore::pending() {
  {
    std::lock_guard<std::mutex> lock(sendMu_);
    if (!sendQueue_.empty()) return true;
  }
  std::lock_guard<std::mutex> lock(recvMu_);
  return !recvQueue_.empty();
}

ConnectionCore::Step ConnectionCore::progressSend() {
  Step step = Step::kIdle;
  while (!sendQueue_.empty()) {
    if (failed_.load(std::memory_order_acquire)) return Step::kFailed;
    const uint32_t closed = in_->closed.load(std::memory_order_acquire);
    if (closed != 0) {  // the peer will not read what we send
      recordFailure({FailKind::kPeerClosed, in_->reason, 0, 0, static_cast<CloseReason>(closed - 1)});
      return Step::kFailed;
    }
    ShmOp* op = sendQueue_.front();
    const uint64_t head = out_->head.load(std::memory_order_relaxed);
    const uint64_t tail = out_->tail.load(std::memory_order_acquire);
    const size_t n = bytesToProduce(kLinkHeaderBytes + op->numBytes - op->transferred, head, tail, ringBytes_, chunkBytes_);
    if (n == 0) return step;  // the ring is full
    copyStream(op, outData_, ringBytes_, head, n);
    out_->head.store(head + n, std::memory_order_release);
    ringPeer();
    op->transferred += n;
    step = Step::kMoved;
    completeIfWhole(sendQueue_);
  }
  return step;
}

ConnectionCore::Step ConnectionCore::progressRecv() {
  Step step = Step::kIdle;
  while (!recvQueue_.empty()) {
    if (failed_.load(std::memory_order_acquire)) return Step::kFailed;
    ShmOp* op = recvQueue_.front();
    const uint64_t head = in_->head.load(std::memory_order_acquire);
    const uint64_t tail = in_->tail.load(std::memory_order_relaxed);
    // The header alone first: it is checked before any payload lands in the buffer.
    const size_t left = op->transferred < kLinkHeaderBytes ? kLinkHeaderBytes - op->transferred
                                                           : kLinkHeaderBytes + op->numBytes - op->transferred;
    const size_t n = bytesToConsume(left, head, tail, chunkBytes_);
    if (n == 0 && left > 0) {
      const uint32_t closed = in_->closed.load(std::memory_order_acquire);
      if (closed == 0 || in_->head.load(std::memory_order_acquire) != head) return step;
      recordFailure({FailKind::kPeerClosed, in_->reason, 0, 0, static_cast<CloseReason>(closed - 1)});
      return Step::kFailed;
    }
    const size_t before = op->transferred;
    copyStream(op, inData_, ringBytes_, tail, n);
    in_->tail.store(tail + n, std::memory_order_release);
    ringPeer();
    op->transferred += n;
    step = Step::kMoved;
    if (before < kLinkHeaderBytes && op->transferred == kLinkHeaderBytes && !checkHeader(op)) return Step::kFailed;
    completeIfWhole(recvQueue_);
  }
  return step;
}

void ConnectionCore::completeIfWhole(std::deque<ShmOp*>& queue) {
  ShmOp* op = queue.front();
  if (op->transferred != kLinkHeaderBytes + op->numBytes) return;
  queue.pop_front();
  op->queued = false;
  op->complete();
}

bool ConnectionCore::checkHeader(ShmOp* op) {
  if (op->header[0] == op->tag && op->header[1] == op->numBytes) return true;
  Failure failure{FailKind::kMismatch, "message mismatch", op->header[0], op->header[1]};
  STRATA_LOG(kWarn, kNet, "shm recv from rank ", peer_, ": expected tag ", op->tag, " with ", op->numBytes,
             " bytes, got tag ", failure.gotTag, " with ", failure.gotBytes, " bytes; failing the link");
  recordFailure(failure);
  recvQueue_.pop_front();
  op->queued = false;
  op->completeWithError(std::move(failure));
  return false;
}

void ConnectionCore::checkPeer() {
  const uint32_t closed = in_->closed.load(std::memory_order_acquire);
  if (closed != 0 && !failed_.load(std::memory_order_acquire)) {
    // Bytes still in the ring are the peer's last messages: let the receives take them.
    const bool recvBlocked = [&] {
      std::lock_guard<std::mutex> lock(recvMu_);
      return recvQueue_.empty() || in_->head.load(std::memory_order_acquire) == in_->tail.load(std::memory_order_relaxed);
    }();
    std::lock_guard<std::mutex> lock(sendMu_);
    if (recvBlocked || !sendQueue_.empty())
      recordFailure({FailKind::kPeerClosed, in_->reason, 0, 0, static_cast<CloseReason>(closed - 1)});
  }
  const int64_t now = nowUs();
  if (!failed_.load(std::memory_order_acquire) && now - lastLivenessUs_.load(std::memory_order_relaxed) >= kLinkLivenessUs) {
    lastLivenessUs_.store(now, std::memory_order_relaxed);
    if (peerPid_ > 0 && kill(peerPid_, 0) != 0 && errno == ESRCH)
      recordFailure({FailKind::kPeerDied, c10::str("rank ", peer_, " (pid ", peerPid_, ") died")});
  }
  if (failed_.load(std::memory_order_acquire)) failAll();
}

uint32_t ConnectionCore::bellValue() const { return doorbellValue(*myBell_); }

// `seen` was read before the caller last looked for work: anything a peer moved since then
// changed the word, so the futex returns at once instead of missing the wakeup.
void ConnectionCore::sleepOnBell(uint32_t seen, std::chrono::microseconds limit) {
  sleepOnDoorbell(*myBell_, seen, limit);
}

void ConnectionCore::ringPeer() { ringDoorbell(*peerBell_); }

void ConnectionCore::abandon(ShmOp* op) {
  bool wasQueued = false;
  {
    std::lock_guard<std::mutex> lock(op->kind == ShmOp::Kind::kSend ? sendMu_ : recvMu_);
    wasQueued = op->queued;
    if (wasQueued) {
      recordFailure({FailKind::kAbandoned, c10::str("a pending ", linkVerb(op->kind), " of ", op->numBytes,
                                                    " bytes tag ", op->tag, " was destroyed before completing")});
    }
  }
  if (wasQueued) failAll();
}

void ConnectionCore::close(const std::string& why, CloseReason reason) {
  writeCloseWord(why, reason);
  recordFailure({FailKind::kClosedLocally, why});
  failAll();
}

void ConnectionCore::writeCloseWord(const std::string& why, CloseReason reason) {
  if (told_.exchange(true)) return;
  const size_t n = std::min(why.size(), sizeof(out_->reason) - 1);
  std::memcpy(out_->reason, why.data(), n);
  out_->reason[n] = '\0';
  out_->closed.store(static_cast<uint32_t>(reason) + 1, std::memory_order_release);
  ringPeer();
  ringDoorbell(*myBell_);  // our own waiters look again
}

void ConnectionCore::recordFailure(Failure failure) {
  std::lock_guard<std::mutex> lock(failureMu_);
  if (failure_.kind == FailKind::kNone) failure_ = std::move(failure);
  failed_.store(true, std::memory_order_release);
}

void ConnectionCore::failAll() {
  Failure failure;
  {
    std::lock_guard<std::mutex> lock(failureMu_);
    failure = failure_;
  }
  // A mismatch is left to the owner, who closes with its own reason (as over TCP).
  if (failure.kind != FailKind::kMismatch && failure.kind != FailKind::kPeerClosed)
    writeCloseWord(failure.detail, CloseReason::kNetwork);
  {
    std::lock_guard<std::mutex> lock(sendMu_);
    failQueue(sendQueue_);
  }
  std::lock_guard<std::mutex> lock(recvMu_);
  failQueue(recvQueue_);
}

void ConnectionCore::failQueue(std::deque<ShmOp*>& queue) {
  if (queue.empty()) return;
  const Failure failure = failureForOp();
  for (ShmOp* op : queue) {
    op->queued = false;
    op->completeWithError(failure);
  }
  queue.clear();
}

Failure ConnectionCore::failureForOp() const {
  std::lock_guard<std::mutex> lock(failureMu_);
  Failure failure = failure_;
  if (failure.kind == FailKind::kMismatch) failure.kind = FailKind::kAfterMismatch;
  return failure;
}

// ----- ShmConnection -------------------------------------------------------------------

ShmConnection::~ShmConnection() { core_->close("the Connection was destroyed", CloseReason::kNetwork); }

std::unique_ptr<PendingOp> ShmConnection::postSend(const void* data, size_t numBytes, uint64_t tag) {
  return post(ShmOp::Kind::kSend, const_cast<void*>(data), numBytes, tag);
}

std::unique_ptr<PendingOp> ShmConnection::postRecv(void* data, size_t numBytes, uint64_t tag) {
  return post(ShmOp::Kind::kRecv, data, numBytes, tag);
}

std::unique_ptr<PendingOp> ShmConnection::post(ShmOp::Kind kind, void* data, size_t numBytes,
                                                          uint64_t tag) {
  STRATA_CHECK(data != nullptr || numBytes == 0, "shm ", linkVerb(kind), " with rank ", peer(), ": null buffer for ",
               numBytes, " bytes tag ", tag);
  auto op = std::make_unique<ShmOp>(core_, kind, data, numBytes, tag);
  core_->post(op.get());
  if (!op->done()) transport_->kick();
  return op;
}

}  // namespace strata::transport::shm
