#include "transport/tcp/connection.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/errors.h"
#include "core/logging.h"
#include "transport/tcp/io_loop.h"

namespace strata::transport::tcp {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the frame header is little-endian");

// send(2) and recv(2) reject a length above INT_MAX with EINVAL, so a single syscall moves
// at most 1 GiB; the kernel segments it anyway.
constexpr size_t kMaxIoBytes = size_t{1} << 30;
// A wait first spins this long: a small message's reply usually lands within a few
// microseconds, far cheaper than a futex sleep and wakeup.
constexpr std::chrono::microseconds kSpinBeforeBlock{20};
// TLS sends coalesce the header with up to this many bytes: one full TLS record.
constexpr size_t kTlsRecordBytes = 16384;

void cpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Fills iov with the unsent/unreceived part of [header | payload]; returns the count.
int buildIov(TcpOp* op, size_t done, iovec iov[2]) {
  int count = 0;
  if (done < kHeaderBytes)
    iov[count++] = {reinterpret_cast<uint8_t*>(&op->header) + done, kHeaderBytes - done};
  const size_t payloadDone = done > kHeaderBytes ? done - kHeaderBytes : 0;
  const size_t payloadLeft = op->numBytes - payloadDone;
  if (payloadLeft > 0) iov[count++] = {op->data + payloadDone, std::min(payloadLeft, kMaxIoBytes)};
  return count;
}

const char* verb(TcpOp::Kind kind) { return kind == TcpOp::Kind::kSend ? "send" : "recv"; }

}  // namespace

// ----- TcpOp ---------------------------------------------------------------------------

TcpOp::TcpOp(std::shared_ptr<ConnectionCore> core, Kind kind, void* data, size_t numBytes,
             uint64_t tag)
    : kind(kind),
      data(static_cast<uint8_t*>(data)),
      numBytes(numBytes),
      tag(tag),
      header{tag, numBytes},
      core_(std::move(core)) {}

TcpOp::~TcpOp() {
  if (!done()) core_->abandon(this);
  std::lock_guard<std::mutex> lock(mu_);  // a completer may still be inside notify_all
}

void TcpOp::complete() {
  std::lock_guard<std::mutex> lock(mu_);
  state_.store(kDone, std::memory_order_release);
  cv_.notify_all();
}

void TcpOp::completeWithError(Failure failure) {
  std::lock_guard<std::mutex> lock(mu_);
  failure_ = std::move(failure);
  state_.store(kFailed, std::memory_order_release);
  cv_.notify_all();
}

void TcpOp::wait(std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  const auto spinUntil = start + kSpinBeforeBlock;
  while (state_.load(std::memory_order_acquire) == kPending && Clock::now() < spinUntil) cpuRelax();
  if (state_.load(std::memory_order_acquire) == kPending) {
    std::unique_lock<std::mutex> lock(mu_);
    const bool finished = cv_.wait_until(
        lock, start + timeout, [&] { return state_.load(std::memory_order_acquire) != kPending; });
    if (!finished) throwTimeout(timeout);
  }
  if (state_.load(std::memory_order_acquire) == kFailed) throwFailure();
}

void TcpOp::throwTimeout(std::chrono::milliseconds timeout) const {
  const char* dir = kind == Kind::kSend ? "send to" : "recv from";
  STRATA_THROW(TimeoutError, "tcp ", dir, " rank ", core_->peer(), " timed out after ",
               timeout.count(), " ms (", numBytes, " bytes tag ", tag, "; ", transferred.load(),
               " of ", kHeaderBytes + numBytes, " bytes incl. header transferred)");
}

void TcpOp::throwFailure() const {
  const int peer = core_->peer();
  const std::string during = c10::str(" during ", verb(kind), " of ", numBytes, " bytes tag ", tag);
  switch (failure_.kind) {
    case FailKind::kMismatch:
      STRATA_THROW(MismatchError, "tcp recv from rank ", peer, ": message mismatch: expected tag ",
                   tag, " with ", numBytes, " bytes, the peer sent tag ", failure_.gotTag, " with ",
                   failure_.gotBytes, " bytes (the ranks posted different sends and receives)");
    case FailKind::kPeerClosed:
      STRATA_THROW(NetworkError, "connection to rank ", peer, " closed (peer died?)", during, " (",
                   failure_.detail, ")");
    case FailKind::kAfterMismatch:
      STRATA_THROW(NetworkError, "connection to rank ", peer,
                   " unusable after an earlier message mismatch", during);
    case FailKind::kClosedLocally:
      STRATA_THROW(NetworkError, "connection to rank ", peer, " closed locally (", failure_.detail,
                   ")", during);
    case FailKind::kPeerAborted: {
      const std::string text = c10::str("rank ", peer, " closed the connection", during, ": ", failure_.detail);
      if (failure_.peerReason == CloseReason::kMismatch) STRATA_THROW(MismatchError, text);
      if (failure_.peerReason == CloseReason::kTimeout) STRATA_THROW(TimeoutError, text);
      STRATA_THROW(NetworkError, text);
    }
    case FailKind::kIoError:
    case FailKind::kAbandoned:
    case FailKind::kNone: break;
  }
  STRATA_THROW(NetworkError, "connection to rank ", peer, " failed", during, ": ", failure_.detail);
}

// ----- ConnectionCore ------------------------------------------------------------------

ConnectionCore::ConnectionCore(Fd fd, int peer, uint64_t id, std::unique_ptr<TlsSession> tls)
    : peer_(peer), id_(id), usesTls_(tls != nullptr), fd_(std::move(fd)), tls_(std::move(tls)) {}

ConnectionCore::~ConnectionCore() = default;

void ConnectionCore::post(TcpOp* op) {
  Progress progressed = Progress::kIdle;
  {
    std::lock_guard<std::mutex> lock(mutexFor(op->kind));
    if (failed_.load(std::memory_order_acquire)) {
      op->completeWithError(failureForOp());
      return;
    }
    auto& queue = op->kind == TcpOp::Kind::kSend ? sendQueue_ : recvQueue_;
    queue.push_back(op);
    op->queued = true;
    if (queue.size() == 1) progressed = progress(op->kind);  // fast path: first in line
  }
  if (progressed == Progress::kFailed) failAll();
}

void ConnectionCore::onEvents(uint32_t events) {
  Progress recvProgress = Progress::kIdle;
  Progress sendProgress = Progress::kIdle;
  // A TLS record may be read while sending or written while receiving: try both.
  if (usesTls_) events |= EPOLLIN | EPOLLOUT;
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
    std::lock_guard<std::mutex> lock(recvMu_);
    recvProgress = progressRecv();
  }
  if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) {
    std::lock_guard<std::mutex> lock(sendMu_);
    sendProgress = progressSend();
  }
  if (recvProgress == Progress::kFailed || sendProgress == Progress::kFailed) failAll();
}

ConnectionCore::Progress ConnectionCore::progress(TcpOp::Kind kind) {
  return kind == TcpOp::Kind::kSend ? progressSend() : progressRecv();
}

ConnectionCore::Progress ConnectionCore::progressSend() {
  if (tls_) return progressSendTls();
  while (!sendQueue_.empty() && !closed_ && !failed_.load(std::memory_order_relaxed)) {
    TcpOp* op = sendQueue_.front();
    const size_t done = op->transferred.load(std::memory_order_relaxed);
    iovec iov[2];
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(buildIov(op, done, iov));
    const ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return Progress::kIdle;  // EPOLLOUT resumes
      const bool peerGone = err == EPIPE || err == ECONNRESET;
      recordFailure({peerGone ? FailKind::kPeerClosed : FailKind::kIoError, errnoText(err)});
      return Progress::kFailed;
    }
    sentBytes(op, done + static_cast<size_t>(n));
  }
  return failed_.load(std::memory_order_relaxed) ? Progress::kFailed : Progress::kIdle;
}

// Bookkeeping after bytes of the front send left (plain or TLS): completes the op when done.
void ConnectionCore::sentBytes(TcpOp* op, size_t done) {
  op->transferred.store(done, std::memory_order_relaxed);
  if (done == kHeaderBytes + op->numBytes) {
    sendQueue_.pop_front();
    op->queued = false;
    op->complete();
  }
}

// Bookkeeping after bytes of the front receive arrived (plain or TLS): the header, once
// complete, is checked (an abort frame or a mismatch fails the connection: false); the op
// completes when its payload is in.
bool ConnectionCore::receivedBytes(TcpOp* op, size_t before, size_t done) {
  op->transferred.store(done, std::memory_order_relaxed);
  if (before < kHeaderBytes && done >= kHeaderBytes && op->header.tag == kAbortTag) {
    readAbortFrame(op, done - kHeaderBytes);
    return false;
  }
  if (before < kHeaderBytes && done >= kHeaderBytes && !checkHeader(op)) return false;
  if (done == kHeaderBytes + op->numBytes) {
    recvQueue_.pop_front();
    op->queued = false;
    op->complete();
  }
  return true;
}

ConnectionCore::Progress ConnectionCore::progressRecv() {
  if (tls_) return progressRecvTls();
  while (!recvQueue_.empty() && !closed_ && !failed_.load(std::memory_order_relaxed)) {
    TcpOp* op = recvQueue_.front();
    const size_t before = op->transferred.load(std::memory_order_relaxed);
    iovec iov[2];
    const int count = buildIov(op, before, iov);
    const ssize_t n = ::readv(fd_.get(), iov, count);
    if (n <= 0) {
      const int err = n == 0 ? 0 : errno;
      if (err == EINTR) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return Progress::kIdle;  // EPOLLIN resumes
      const bool peerGone = n == 0 || err == ECONNRESET;
      recordFailure({peerGone ? FailKind::kPeerClosed : FailKind::kIoError,
                     n == 0 ? std::string("end of stream") : errnoText(err)});
      return Progress::kFailed;
    }
    const size_t done = before + static_cast<size_t>(n);
    if (!receivedBytes(op, before, done)) return Progress::kFailed;
  }
  return failed_.load(std::memory_order_relaxed) ? Progress::kFailed : Progress::kIdle;
}

ConnectionCore::Progress ConnectionCore::recordTlsFailure(TlsStatus status, const std::string& why) {
  recordFailure({status == TlsStatus::kClosed ? FailKind::kPeerClosed : FailKind::kIoError,
                 "TLS: " + why});
  return Progress::kFailed;
}

// As progressSend, through the TLS session: the header and the first payload bytes go
// in one record (a retry after kWantIo rebuilds the same bytes, as OpenSSL requires).
ConnectionCore::Progress ConnectionCore::progressSendTls() {
  uint8_t scratch[kTlsRecordBytes];
  while (!sendQueue_.empty() && !closed_ && !failed_.load(std::memory_order_relaxed)) {
    TcpOp* op = sendQueue_.front();
    const size_t done = op->transferred.load(std::memory_order_relaxed);
    iovec iov[2];
    const int count = buildIov(op, done, iov);
    const void* bytes = iov[0].iov_base;
    size_t length = iov[0].iov_len;
    if (count == 2) {
      const size_t payload = std::min(iov[1].iov_len, kTlsRecordBytes - iov[0].iov_len);
      std::memcpy(scratch, iov[0].iov_base, iov[0].iov_len);
      std::memcpy(scratch + iov[0].iov_len, iov[1].iov_base, payload);
      bytes = scratch;
      length = iov[0].iov_len + payload;
    }
    size_t n = 0;
    std::string why;
    const TlsStatus status = tls_->write(bytes, length, &n, &why);
    if (status == TlsStatus::kWantIo) return Progress::kIdle;  // epoll resumes
    if (status != TlsStatus::kOk) return recordTlsFailure(status, why);
    sentBytes(op, done + n);
  }
  return failed_.load(std::memory_order_relaxed) ? Progress::kFailed : Progress::kIdle;
}

// As progressRecv, through the TLS session. Reads until the session wants the socket,
// so nothing decrypted is left behind unnoticed with an op waiting (edge-triggered epoll).
ConnectionCore::Progress ConnectionCore::progressRecvTls() {
  while (!recvQueue_.empty() && !closed_ && !failed_.load(std::memory_order_relaxed)) {
    TcpOp* op = recvQueue_.front();
    const size_t before = op->transferred.load(std::memory_order_relaxed);
    iovec iov[2];
    buildIov(op, before, iov);
    size_t n = 0;
    std::string why;
    const TlsStatus status = tls_->read(iov[0].iov_base, iov[0].iov_len, &n, &why);
    if (status == TlsStatus::kWantIo) return Progress::kIdle;  // epoll resumes
    if (status != TlsStatus::kOk) return recordTlsFailure(status, why);
    const size_t done = before + n;
    if (!receivedBytes(op, before, done)) return Progress::kFailed;
  }
  return failed_.load(std::memory_order_relaxed) ? Progress::kFailed : Progress::kIdle;
}

// The header arrived: it must match what this receive expects, or the stream is out of
// step and nothing after it can be trusted.
bool ConnectionCore::checkHeader(TcpOp* op) {
  if (op->header.tag == op->tag && op->header.numBytes == op->numBytes) return true;
  Failure failure{FailKind::kMismatch, "message mismatch", op->header.tag, op->header.numBytes};
  STRATA_LOG(kWarn, kNet, "tcp recv from rank ", peer_, ": expected tag ", op->tag, " with ",
             op->numBytes, " bytes, got tag ", failure.gotTag, " with ", failure.gotBytes,
             " bytes; failing the connection");
  recordFailure(failure);
  recvQueue_.pop_front();
  op->queued = false;
  op->completeWithError(std::move(failure));
  return false;
}

// The peer's abort frame: part of its payload may already sit in the op's buffer (readv
// filled it), the rest is read from the socket, waiting briefly (the peer wrote the whole
// frame at once, then shut the socket down).
void ConnectionCore::readAbortFrame(TcpOp* op, size_t received) {
  const size_t length = std::min<uint64_t>(op->header.numBytes, kMaxAbortReasonBytes);
  std::string payload(reinterpret_cast<const char*>(op->data), std::min({received, length, op->numBytes}));
  const auto deadline = Clock::now() + std::chrono::milliseconds(200);
  while (payload.size() < length && Clock::now() < deadline) {
    char buf[kMaxAbortReasonBytes];
    if (tls_) {
      size_t got = 0;
      std::string why;
      const TlsStatus status = tls_->read(buf, length - payload.size(), &got, &why);
      if (status == TlsStatus::kOk) {
        payload.append(buf, got);
        continue;
      }
      if (status != TlsStatus::kWantIo) break;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      continue;
    }
    const ssize_t n = ::recv(fd_.get(), buf, length - payload.size(), MSG_DONTWAIT);
    if (n > 0) {
      payload.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      break;
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  Failure failure{FailKind::kPeerAborted, payload.size() > 1 ? payload.substr(1) : std::string("(no reason given)")};
  if (!payload.empty() && payload[0] <= static_cast<char>(CloseReason::kMismatch))
    failure.peerReason = static_cast<CloseReason>(payload[0]);
  recordFailure(std::move(failure));
}

// Best effort: only at a message boundary (nothing half-sent), in one non-blocking write.
void ConnectionCore::sendAbortFrame(const std::string& why, CloseReason reason) {
  if (closed_ || !fd_.valid()) return;
  if (!sendQueue_.empty() && sendQueue_.front()->transferred.load(std::memory_order_relaxed) != 0) return;
  std::string payload(1, static_cast<char>(reason));
  payload += why.substr(0, kMaxAbortReasonBytes - 1);
  FrameHeader header{kAbortTag, payload.size()};
  if (tls_) {
    // A half-written record may only be followed by the same bytes: skip the frame then.
    if (tls_->writePending()) return;
    std::string frame(reinterpret_cast<const char*>(&header), kHeaderBytes);
    frame += payload;
    size_t n = 0;
    std::string why;
    (void)tls_->write(frame.data(), frame.size(), &n, &why);
    return;
  }
  iovec iov[2] = {{&header, kHeaderBytes}, {payload.data(), payload.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  (void)::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void ConnectionCore::abandon(TcpOp* op) {
  bool wasQueued = false;
  {
    std::lock_guard<std::mutex> lock(mutexFor(op->kind));
    wasQueued = op->queued;
    if (wasQueued) {
      recordFailure({FailKind::kAbandoned,
                     c10::str("a pending ", verb(op->kind), " of ", op->numBytes, " bytes tag ",
                              op->tag, " was destroyed before completing")});
    }
  }
  if (wasQueued) {
    STRATA_LOG(kWarn, kNet, "tcp connection to rank ", peer_, ": a pending ", verb(op->kind),
               " was destroyed before completing; failing the connection");
    failAll();
  }
}

void ConnectionCore::close(const std::string& why, CloseReason reason) {
  {
    std::lock_guard<std::mutex> lock(sendMu_);
    if (!failed_.load(std::memory_order_acquire) || failureKind() == FailKind::kMismatch) sendAbortFrame(why, reason);
  }
  recordFailure({FailKind::kClosedLocally, why});
  failAll();
  std::lock_guard<std::mutex> sendLock(sendMu_);
  std::lock_guard<std::mutex> recvLock(recvMu_);
  closed_ = true;
  fd_.reset();
  tls_.reset();
}

FailKind ConnectionCore::failureKind() const {
  std::lock_guard<std::mutex> lock(failureMu_);
  return failure_.kind;
}

void ConnectionCore::recordFailure(Failure failure) {
  std::lock_guard<std::mutex> lock(failureMu_);
  if (failure_.kind == FailKind::kNone) failure_ = std::move(failure);
  failed_.store(true, std::memory_order_release);
}

void ConnectionCore::failAll() {
  bool mismatch;
  {
    std::lock_guard<std::mutex> lock(failureMu_);
    mismatch = failure_.kind == FailKind::kMismatch;
  }
  {
    std::lock_guard<std::mutex> lock(sendMu_);
    // Other failures shut the socket down at once, so the peer sees EOF rather than a
    // hang. A mismatch is left to the connection's owner: it first tells the peers why
    // (the communicator's failure record) and then closes the connection itself, so the
    // peers report the mismatch rather than a closed connection.
    if (!closed_ && !mismatch) ::shutdown(fd_.get(), SHUT_RDWR);
    failQueue(sendQueue_);
  }
  std::lock_guard<std::mutex> lock(recvMu_);
  failQueue(recvQueue_);
}

void ConnectionCore::failQueue(std::deque<TcpOp*>& queue) {
  if (queue.empty()) return;
  const Failure failure = failureForOp();
  for (TcpOp* op : queue) {
    op->queued = false;
    op->completeWithError(failure);
  }
  queue.clear();
}

// The failure as later ops see it: only the op that met the mismatch reports it as such.
Failure ConnectionCore::failureForOp() const {
  std::lock_guard<std::mutex> lock(failureMu_);
  Failure failure = failure_;
  if (failure.kind == FailKind::kMismatch) failure.kind = FailKind::kAfterMismatch;
  return failure;
}

// ----- TcpConnection -------------------------------------------------------------------

TcpConnection::TcpConnection(std::shared_ptr<ConnectionCore> core, std::shared_ptr<IoLoop> loop)
    : core_(std::move(core)), loop_(std::move(loop)) {}

TcpConnection::~TcpConnection() {
  loop_->remove(core_->id());
  core_->close("the Connection was destroyed");
}

std::unique_ptr<PendingOp> TcpConnection::postSend(const void* data, size_t numBytes,
                                                   uint64_t tag) {
  STRATA_CHECK(data != nullptr || numBytes == 0, "tcp postSend to rank ", peer(),
               ": null buffer for ", numBytes, " bytes tag ", tag);
  auto op =
      std::make_unique<TcpOp>(core_, TcpOp::Kind::kSend, const_cast<void*>(data), numBytes, tag);
  core_->post(op.get());
  return op;
}

std::unique_ptr<PendingOp> TcpConnection::postRecv(void* data, size_t numBytes, uint64_t tag) {
  STRATA_CHECK(data != nullptr || numBytes == 0, "tcp postRecv from rank ", peer(),
               ": null buffer for ", numBytes, " bytes tag ", tag);
  auto op = std::make_unique<TcpOp>(core_, TcpOp::Kind::kRecv, data, numBytes, tag);
  core_->post(op.get());
  return op;
}

}  // namespace strata::transport::tcp
