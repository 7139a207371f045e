#include "collectives/shm_link.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "collectives/doorbell.h"
#include "collectives/p2p_link_plan.h"
#include "collectives/shared_buffers.h"
#include "collectives/shm_domain.h"
#include "core/errors.h"
#include "core/logging.h"

namespace strata::collectives {

struct ShmLinkCore::Ring {
  alignas(64) std::atomic<uint64_t> head{0};  // written by the producer only
  alignas(64) std::atomic<uint64_t> tail{0};  // written by the consumer only
  // Written by the producer only: 0 open, else 1 + CloseReason, after `reason`.
  alignas(64) std::atomic<uint32_t> closed{0};
  char reason[1024];
};

namespace {

constexpr size_t kLinkPageBytes = 4096;
constexpr size_t kLinkHeaderBytes = 16;
// A wait spins this long before it yields or sleeps on the doorbell: a small message's reply
// usually lands within microseconds, far cheaper than a futex sleep and wakeup.
constexpr std::chrono::microseconds kLinkSpin{20};
// Bound on a doorbell sleep, so liveness, close and timeouts are checked this often.
constexpr std::chrono::microseconds kLinkSleep{1000};
constexpr int64_t kLinkLivenessUs = 1000;
// The ring id of the group's link region: far from allocateShared's sequence numbers.
constexpr uint64_t kLinkRegionId = uint64_t{1} << 62;

static_assert(sizeof(ShmLinkCore::Ring) <= kLinkPageBytes, "a ring's control block fits its page");
static_assert(sizeof(ShmLinkCore::Bell) <= kLinkPageBytes, "the doorbell fits its page");

int64_t nowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void linkCpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Copies the stream bytes [position, position + count) between the ring and `bytes`.
void copyIntoRing(uint8_t* ring, size_t ringBytes, uint64_t position, const uint8_t* bytes, size_t count) {
  size_t done = 0;
  for (const RingPiece& p : ringPieces(position, count, ringBytes)) {
    if (p.length > 0) std::memcpy(ring + p.offset, bytes + done, p.length);
    done += p.length;
  }
}

void copyOutOfRing(const uint8_t* ring, size_t ringBytes, uint64_t position, uint8_t* bytes, size_t count) {
  size_t done = 0;
  for (const RingPiece& p : ringPieces(position, count, ringBytes)) {
    if (p.length > 0) std::memcpy(bytes + done, ring + p.offset, p.length);
    done += p.length;
  }
}

// The stream bytes of an op from `done` on, `count` of them: header first, then payload.
template <typename Copy>
void forStreamBytes(ShmLinkOp* op, size_t done, size_t count, Copy&& copy) {
  auto* header = reinterpret_cast<uint8_t*>(op->header);
  while (count > 0) {
    const bool inHeader = done < kLinkHeaderBytes;
    uint8_t* at = inHeader ? header + done : op->data + (done - kLinkHeaderBytes);
    const size_t n = inHeader ? std::min(count, kLinkHeaderBytes - done) : count;
    copy(at, n);
    done += n;
    count -= n;
  }
}

const char* linkVerb(ShmLinkOp::Kind kind) { return kind == ShmLinkOp::Kind::kSend ? "send" : "recv"; }

}  // namespace

// ----- ShmLinkOp -----------------------------------------------------------------------

ShmLinkOp::ShmLinkOp(std::shared_ptr<ShmLinkCore> core, Kind kind, void* data, size_t numBytes, uint64_t tag)
    : kind(kind), data(static_cast<uint8_t*>(data)), numBytes(numBytes), tag(tag), header{tag, numBytes},
      core_(std::move(core)) {}

ShmLinkOp::~ShmLinkOp() {
  if (!done()) core_->abandon(this);
  std::lock_guard<std::mutex> lock(mu_);  // a completer may still be storing the state
}

void ShmLinkOp::complete() {
  std::lock_guard<std::mutex> lock(mu_);
  state_.store(kDone, std::memory_order_release);
}

void ShmLinkOp::completeWithError(LinkFailure failure) {
  std::lock_guard<std::mutex> lock(mu_);
  failure_ = std::move(failure);
  state_.store(kFailed, std::memory_order_release);
}

void ShmLinkOp::wait(std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout;
  const auto spinUntil = start + kLinkSpin;
  // Then, for the core's yield window, it keeps the core but gives it to any other runnable
  // thread of this process (sched_yield), and only then sleeps: a sleeping waiter's wakeup
  // costs far more than the spin (p2p_link_plan.h, p2pYieldUs).
  const auto yieldUntil = start + std::max(kLinkSpin, core_->yieldWindow());
  while (!done()) {
    const uint32_t seen = core_->bellValue();
    if (core_->progress(kind, /*wait=*/true) || done()) continue;
    core_->checkPeer();
    if (done()) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) throwTimeout(timeout);
    if (now < spinUntil) {
      linkCpuRelax();
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

void ShmLinkOp::throwTimeout(std::chrono::milliseconds timeout) const {
  const char* dir = kind == Kind::kSend ? "send to" : "recv from";
  STRATA_THROW(TimeoutError, "shm ", dir, " rank ", core_->peer(), " timed out after ", timeout.count(), " ms (",
               numBytes, " bytes tag ", tag, ")");
}

void ShmLinkOp::throwFailure() const {
  const int peer = core_->peer();
  const std::string during = c10::str(" during ", linkVerb(kind), " of ", numBytes, " bytes tag ", tag);
  switch (failure_.kind) {
    case LinkFail::kMismatch:
      STRATA_THROW(MismatchError, "shm recv from rank ", peer, ": message mismatch: expected tag ", tag, " with ",
                   numBytes, " bytes, the peer sent tag ", failure_.gotTag, " with ", failure_.gotBytes,
                   " bytes (the ranks posted different sends and receives)");
    case LinkFail::kPeerDied:
      STRATA_THROW(NetworkError, "shm link to rank ", peer, " broken: ", failure_.detail, during);
    case LinkFail::kAfterMismatch:
      STRATA_THROW(NetworkError, "shm link to rank ", peer, " unusable after an earlier message mismatch", during);
    case LinkFail::kClosedLocally:
      STRATA_THROW(NetworkError, "shm link to rank ", peer, " closed locally (", failure_.detail, ")", during);
    case LinkFail::kPeerClosed: {
      const std::string text = c10::str("rank ", peer, " closed the connection", during, ": ", failure_.detail);
      if (failure_.peerReason == transport::CloseReason::kMismatch) STRATA_THROW(MismatchError, text);
      if (failure_.peerReason == transport::CloseReason::kTimeout) STRATA_THROW(TimeoutError, text);
      STRATA_THROW(NetworkError, text);
    }
    case LinkFail::kAbandoned:
    case LinkFail::kNone: break;
  }
  STRATA_THROW(NetworkError, "shm link to rank ", peer, " failed", during, ": ", failure_.detail);
}

// ----- ShmLinkCore ---------------------------------------------------------------------

ShmLinkCore::ShmLinkCore(std::shared_ptr<SharedRegion> region, int peer, pid_t peerPid, Ring* out, uint8_t* outData,
                         Ring* in, uint8_t* inData, size_t ringBytes, Bell* myBell, Bell* peerBell,
                         std::chrono::microseconds yield)
    : region_(std::move(region)), peer_(peer), peerPid_(peerPid), out_(out), outData_(outData), in_(in), inData_(inData), ringBytes_(ringBytes),
      chunkBytes_(p2pChunkBytes(ringBytes)), myBell_(myBell), peerBell_(peerBell), yield_(yield) {}

void ShmLinkCore::post(ShmLinkOp* op) {
  Step step = Step::kIdle;
  {
    std::lock_guard<std::mutex> lock(op->kind == ShmLinkOp::Kind::kSend ? sendMu_ : recvMu_);
    if (failed_.load(std::memory_order_acquire)) {
      op->completeWithError(failureForOp());
      return;
    }
    auto& queue = op->kind == ShmLinkOp::Kind::kSend ? sendQueue_ : recvQueue_;
    queue.push_back(op);
    op->queued = true;
    if (queue.size() == 1) step = op->kind == ShmLinkOp::Kind::kSend ? progressSend() : progressRecv();
  }
  if (step == Step::kFailed) failAll();
}

bool ShmLinkCore::progress(ShmLinkOp::Kind kind, bool wait) {
  std::mutex& mu = kind == ShmLinkOp::Kind::kSend ? sendMu_ : recvMu_;
  std::unique_lock<std::mutex> lock(mu, std::defer_lock);
  if (wait) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return false;
  }
  const Step step = kind == ShmLinkOp::Kind::kSend ? progressSend() : progressRecv();
  lock.unlock();
  if (step == Step::kFailed) failAll();
  return step != Step::kIdle;
}

bool ShmLinkCore::pending() {
  {
    std::lock_guard<std::mutex> lock(sendMu_);
    if (!sendQueue_.empty()) return true;
  }
  std::lock_guard<std::mutex> lock(recvMu_);
  return !recvQueue_.empty();
}

ShmLinkCore::Step ShmLinkCore::progressSend() {
  Step step = Step::kIdle;
  while (!sendQueue_.empty()) {
    if (failed_.load(std::memory_order_acquire)) return Step::kFailed;
    const uint32_t closed = in_->closed.load(std::memory_order_acquire);
    if (closed != 0) {  // the peer will not read what we send
      recordFailure({LinkFail::kPeerClosed, in_->reason, 0, 0, static_cast<transport::CloseReason>(closed - 1)});
      return Step::kFailed;
    }
    ShmLinkOp* op = sendQueue_.front();
    const uint64_t head = out_->head.load(std::memory_order_relaxed);
    const uint64_t tail = out_->tail.load(std::memory_order_acquire);
    const size_t n = bytesToProduce(kLinkHeaderBytes + op->numBytes - op->transferred, head, tail, ringBytes_, chunkBytes_);
    if (n == 0) return step;  // the ring is full
    uint64_t at = head;
    forStreamBytes(op, op->transferred, n, [&](const uint8_t* bytes, size_t count) {
      copyIntoRing(outData_, ringBytes_, at, bytes, count);
      at += count;
    });
    out_->head.store(head + n, std::memory_order_release);
    ringPeer();
    op->transferred += n;
    step = Step::kMoved;
    if (op->transferred == kLinkHeaderBytes + op->numBytes) {
      sendQueue_.pop_front();
      op->queued = false;
      op->complete();
    }
  }
  return step;
}

ShmLinkCore::Step ShmLinkCore::progressRecv() {
  Step step = Step::kIdle;
  while (!recvQueue_.empty()) {
    if (failed_.load(std::memory_order_acquire)) return Step::kFailed;
    ShmLinkOp* op = recvQueue_.front();
    const uint64_t head = in_->head.load(std::memory_order_acquire);
    const uint64_t tail = in_->tail.load(std::memory_order_relaxed);
    // The header alone first: it is checked before any payload lands in the buffer.
    const size_t left = op->transferred < kLinkHeaderBytes ? kLinkHeaderBytes - op->transferred
                                                           : kLinkHeaderBytes + op->numBytes - op->transferred;
    const size_t n = bytesToConsume(left, head, tail, chunkBytes_);
    if (n == 0 && left > 0) {
      const uint32_t closed = in_->closed.load(std::memory_order_acquire);
      if (closed == 0 || in_->head.load(std::memory_order_acquire) != head) return step;
      recordFailure({LinkFail::kPeerClosed, in_->reason, 0, 0, static_cast<transport::CloseReason>(closed - 1)});
      return Step::kFailed;
    }
    uint64_t at = tail;
    const size_t before = op->transferred;
    forStreamBytes(op, before, n, [&](uint8_t* bytes, size_t count) {
      copyOutOfRing(inData_, ringBytes_, at, bytes, count);
      at += count;
    });
    in_->tail.store(tail + n, std::memory_order_release);
    ringPeer();
    op->transferred += n;
    step = Step::kMoved;
    if (before < kLinkHeaderBytes && op->transferred == kLinkHeaderBytes && !checkHeader(op)) return Step::kFailed;
    if (op->transferred == kLinkHeaderBytes + op->numBytes) {
      recvQueue_.pop_front();
      op->queued = false;
      op->complete();
    }
  }
  return step;
}

bool ShmLinkCore::checkHeader(ShmLinkOp* op) {
  if (op->header[0] == op->tag && op->header[1] == op->numBytes) return true;
  LinkFailure failure{LinkFail::kMismatch, "message mismatch", op->header[0], op->header[1]};
  STRATA_LOG(kWarn, kNet, "shm recv from rank ", peer_, ": expected tag ", op->tag, " with ", op->numBytes,
             " bytes, got tag ", failure.gotTag, " with ", failure.gotBytes, " bytes; failing the link");
  recordFailure(failure);
  recvQueue_.pop_front();
  op->queued = false;
  op->completeWithError(std::move(failure));
  return false;
}

void ShmLinkCore::checkPeer() {
  const uint32_t closed = in_->closed.load(std::memory_order_acquire);
  if (closed != 0 && !failed_.load(std::memory_order_acquire)) {
    // Bytes still in the ring are the peer's last messages: let the receives take them.
    const bool recvBlocked = [&] {
      std::lock_guard<std::mutex> lock(recvMu_);
      return recvQueue_.empty() || in_->head.load(std::memory_order_acquire) == in_->tail.load(std::memory_order_relaxed);
    }();
    std::lock_guard<std::mutex> lock(sendMu_);
    if (recvBlocked || !sendQueue_.empty())
      recordFailure({LinkFail::kPeerClosed, in_->reason, 0, 0, static_cast<transport::CloseReason>(closed - 1)});
  }
  const int64_t now = nowUs();
  if (!failed_.load(std::memory_order_acquire) && now - lastLivenessUs_.load(std::memory_order_relaxed) >= kLinkLivenessUs) {
    lastLivenessUs_.store(now, std::memory_order_relaxed);
    if (peerPid_ > 0 && kill(peerPid_, 0) != 0 && errno == ESRCH)
      recordFailure({LinkFail::kPeerDied, c10::str("rank ", peer_, " (pid ", peerPid_, ") died")});
  }
  if (failed_.load(std::memory_order_acquire)) failAll();
}

uint32_t ShmLinkCore::bellValue() const { return doorbellValue(*myBell_); }

// `seen` was read before the caller last looked for work: anything a peer moved since then
// changed the word, so the futex returns at once instead of missing the wakeup.
void ShmLinkCore::sleepOnBell(uint32_t seen, std::chrono::microseconds limit) {
  sleepOnDoorbell(*myBell_, seen, limit);
}

void ShmLinkCore::ringPeer() { ringDoorbell(*peerBell_); }

void ShmLinkCore::abandon(ShmLinkOp* op) {
  bool wasQueued = false;
  {
    std::lock_guard<std::mutex> lock(op->kind == ShmLinkOp::Kind::kSend ? sendMu_ : recvMu_);
    wasQueued = op->queued;
    if (wasQueued) {
      recordFailure({LinkFail::kAbandoned, c10::str("a pending ", linkVerb(op->kind), " of ", op->numBytes,
                                                    " bytes tag ", op->tag, " was destroyed before completing")});
    }
  }
  if (wasQueued) failAll();
}

void ShmLinkCore::close(const std::string& why, transport::CloseReason reason) {
  writeCloseWord(why, reason);
  recordFailure({LinkFail::kClosedLocally, why});
  failAll();
}

void ShmLinkCore::writeCloseWord(const std::string& why, transport::CloseReason reason) {
  if (told_.exchange(true)) return;
  const size_t n = std::min(why.size(), sizeof(out_->reason) - 1);
  std::memcpy(out_->reason, why.data(), n);
  out_->reason[n] = '\0';
  out_->closed.store(static_cast<uint32_t>(reason) + 1, std::memory_order_release);
  ringPeer();
  ringDoorbell(*myBell_);  // our own waiters look again
}

void ShmLinkCore::recordFailure(LinkFailure failure) {
  std::lock_guard<std::mutex> lock(failureMu_);
  if (failure_.kind == LinkFail::kNone) failure_ = std::move(failure);
  failed_.store(true, std::memory_order_release);
}

void ShmLinkCore::failAll() {
  LinkFailure failure;
  {
    std::lock_guard<std::mutex> lock(failureMu_);
    failure = failure_;
  }
  // A mismatch is left to the owner, who closes with its own reason (as over TCP).
  if (failure.kind != LinkFail::kMismatch && failure.kind != LinkFail::kPeerClosed)
    writeCloseWord(failure.detail, transport::CloseReason::kNetwork);
  {
    std::lock_guard<std::mutex> lock(sendMu_);
    failQueue(sendQueue_);
  }
  std::lock_guard<std::mutex> lock(recvMu_);
  failQueue(recvQueue_);
}

void ShmLinkCore::failQueue(std::deque<ShmLinkOp*>& queue) {
  if (queue.empty()) return;
  const LinkFailure failure = failureForOp();
  for (ShmLinkOp* op : queue) {
    op->queued = false;
    op->completeWithError(failure);
  }
  queue.clear();
}

LinkFailure ShmLinkCore::failureForOp() const {
  std::lock_guard<std::mutex> lock(failureMu_);
  LinkFailure failure = failure_;
  if (failure.kind == LinkFail::kMismatch) failure.kind = LinkFail::kAfterMismatch;
  return failure;
}

// ----- ShmConnection -------------------------------------------------------------------

ShmConnection::~ShmConnection() { core_->close("the Connection was destroyed", transport::CloseReason::kNetwork); }

std::unique_ptr<transport::PendingOp> ShmConnection::postSend(const void* data, size_t numBytes, uint64_t tag) {
  return post(ShmLinkOp::Kind::kSend, const_cast<void*>(data), numBytes, tag);
}

std::unique_ptr<transport::PendingOp> ShmConnection::postRecv(void* data, size_t numBytes, uint64_t tag) {
  return post(ShmLinkOp::Kind::kRecv, data, numBytes, tag);
}

std::unique_ptr<transport::PendingOp> ShmConnection::post(ShmLinkOp::Kind kind, void* data, size_t numBytes,
                                                          uint64_t tag) {
  STRATA_CHECK(data != nullptr || numBytes == 0, "shm ", linkVerb(kind), " with rank ", peer(), ": null buffer for ",
               numBytes, " bytes tag ", tag);
  auto op = std::make_unique<ShmLinkOp>(core_, kind, data, numBytes, tag);
  core_->post(op.get());
  if (!op->done()) set_->kick();
  return op;
}

// ----- ShmLinkSet ----------------------------------------------------------------------

ShmLinkSet::ShmLinkSet(ShmDomain& domain, const std::vector<int>& localRanks, const std::vector<pid_t>& pids,
                       size_t ringBytes, std::chrono::microseconds yield)
    : ringBytes_(ringBytes), localRanks_(localRanks) {
  const int localSize = domain.localSize();
  const int me = domain.localRank();
  const size_t slotBytes = kLinkPageBytes + ringBytes;
  const size_t partBytes = kLinkPageBytes + static_cast<size_t>(localSize - 1) * slotBytes;
  region_ = SharedRegion::createShared(domain, kLinkRegionId, partBytes);
  auto bellOf = [&](int local) { return reinterpret_cast<ShmLinkCore::Bell*>(region_->part(local)); };
  // The ring from `sender` to `receiver` lives in the receiver's part.
  auto slotOf = [&](int sender, int receiver) {
    const int index = sender < receiver ? sender : sender - 1;
    return region_->part(receiver) + kLinkPageBytes + static_cast<size_t>(index) * slotBytes;
  };
  myBell_ = bellOf(me);
  cores_.resize(static_cast<size_t>(localSize));
  for (int p = 0; p < localSize; ++p) {
    if (p == me) continue;
    uint8_t* out = slotOf(me, p);
    uint8_t* in = slotOf(p, me);
    cores_[p] = std::make_shared<ShmLinkCore>(region_, localRanks[p], pids[p], reinterpret_cast<ShmLinkCore::Ring*>(out),
                                              out + kLinkPageBytes, reinterpret_cast<ShmLinkCore::Ring*>(in),
                                              in + kLinkPageBytes, ringBytes, myBell_, bellOf(p), yield);
  }
  STRATA_LOG(kDebug, kShm, "p2p shm links: ", localSize - 1, " peers, rings of ", ringBytes, " bytes, waits yield ",
             yield.count(), " us before sleeping");
}

ShmLinkSet::~ShmLinkSet() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  ringDoorbell(*myBell_);
  if (thread_.joinable()) thread_.join();
}

std::unique_ptr<transport::Connection> ShmLinkSet::connection(int peer) {
  for (size_t i = 0; i < localRanks_.size(); ++i)
    if (localRanks_[i] == peer && cores_[i]) return std::make_unique<ShmConnection>(cores_[i], this);
  STRATA_THROW(Error, "shm link: rank ", peer, " is not a local peer");
}

void ShmLinkSet::kick() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    kicked_ = true;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  cv_.notify_all();
  ringDoorbell(*myBell_);
}

// Moves the bytes of ops nobody waits on (eager sends bigger than the free space), sleeping
// on the doorbell while the peers make no room, and on the condition variable when idle.
void ShmLinkSet::run() {
  prctl(PR_SET_TIMERSLACK, 1UL);  // a 50 us default slack would stretch every bounded sleep
  prctl(PR_SET_NAME, "strata-shmlink");
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_) return;
      kicked_ = false;
    }
    const uint32_t seen = myBell_->word.load(std::memory_order_seq_cst);
    bool pending = false;
    bool moved = false;
    ShmLinkCore* sleeper = nullptr;
    for (auto& core : cores_) {
      if (!core) continue;
      moved |= core->progress(ShmLinkOp::Kind::kSend, /*wait=*/false);
      moved |= core->progress(ShmLinkOp::Kind::kRecv, /*wait=*/false);
      if (core->pending()) {
        pending = true;
        core->checkPeer();
        sleeper = core.get();
      }
    }
    if (moved) continue;
    if (pending) {
      sleeper->sleepOnBell(seen, kLinkSleep);
      continue;
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stop_ || kicked_; });
  }
}

}  // namespace strata::collectives
