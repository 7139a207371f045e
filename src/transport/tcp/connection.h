// One TCP connection to one peer: framing, ordered send and receive queues, and the
// PendingOp handles the caller waits on.
//
// Wire format: every message is a 16-byte header {u64 tag, u64 numBytes} (little-endian)
// followed by numBytes of payload, written from and read into the caller's buffer with
// no staging copy. A zero-byte message is a bare header, so tags and order stay checked.
//
// Threading contract:
//   * ConnectionCore is shared by the user-facing TcpConnection, its TcpOps and the
//     transport's I/O thread (IoLoop). Posting is thread-safe; sends and receives may be
//     posted from different threads. Ops of one direction complete in posting order.
//   * Socket I/O of a direction runs under that direction's mutex, either on the posting
//     thread (the fast path, when the op is first in line) or on the I/O thread when epoll
//     reports the socket ready. Non-blocking sockets: nobody ever sleeps holding a mutex.
//   * Lock order: sendMu_ or recvMu_ (never both, except close() which takes send then
//     recv), then failureMu_ or an op's mu_. failAll() is called holding neither
//     direction mutex.
//   * A failure (peer EOF/ECONNRESET/EPIPE, socket error, header mismatch, an abandoned
//     op, local close) is recorded once; every pending and later op fails with it, and
//     the socket is shut down so the peer fails promptly too instead of hanging.
//   * With TLS (between hosts, tls.h), the bytes go through the connection's TlsSession instead of
//     sendmsg/readv; the session serialises the two directions' OpenSSL calls itself.
//     Each send coalesces the header with the first payload bytes into one TLS record.
//   * A TcpOp is waited on by one thread at a time. Destroying an op that has not
//     completed fails the connection: its buffer is going away mid-message, and skipping
//     the message would put the stream out of step.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "transport/tcp/socket.h"
#include "transport/tcp/tls.h"
#include "transport/transport.h"

namespace strata::transport::tcp {

// Why an op or a connection failed.
enum class FailKind {
  kNone,
  kPeerClosed,     // EOF, ECONNRESET or EPIPE: the peer went away
  kIoError,        // another socket error
  kMismatch,       // the peer's message had another tag or size (this op only)
  kAfterMismatch,  // a later op on a connection that had a mismatch
  kClosedLocally,  // our Connection or Transport was destroyed
  kAbandoned,      // a pending op was destroyed before it completed
  kPeerAborted,    // the peer closed the connection telling us why (an abort frame)
};

struct Failure {
  FailKind kind = FailKind::kNone;
  std::string detail;   // errno text or similar
  uint64_t gotTag = 0;  // kMismatch: the header that arrived
  uint64_t gotBytes = 0;
  CloseReason peerReason = CloseReason::kNetwork;  // kPeerAborted: the peer's error type
};

// A frame with this tag is not a message but the peer's last words: one CloseReason byte
// and the reason text, sent by close() when no message is half-sent. Users' tags must
// not take this value.
constexpr uint64_t kAbortTag = ~uint64_t{0};
// The reason text is cut to this length: it must fit a socket buffer in one write.
constexpr size_t kMaxAbortReasonBytes = 1024;

struct FrameHeader {
  uint64_t tag;
  uint64_t numBytes;
};
constexpr size_t kHeaderBytes = sizeof(FrameHeader);
static_assert(kHeaderBytes == 16, "the frame header is two u64");

class ConnectionCore;

// A posted send or receive. Owned by the caller (unique_ptr<PendingOp>); the core's
// queue holds a raw pointer until the op completes, and ~TcpOp unlinks it.
class TcpOp final : public PendingOp {
 public:
  enum class Kind { kSend, kRecv };
  TcpOp(std::shared_ptr<ConnectionCore> core, Kind kind, void* data, size_t numBytes, uint64_t tag);
  ~TcpOp() override;

  void wait(std::chrono::milliseconds timeout) override;
  bool done() override { return state_.load(std::memory_order_acquire) != kPending; }

  // Called by ConnectionCore holding the op's direction mutex.
  void complete();
  void completeWithError(Failure failure);

  const Kind kind;
  uint8_t* const data;
  const size_t numBytes;
  const uint64_t tag;
  FrameHeader header;                  // sent header, or the one received
  std::atomic<size_t> transferred{0};  // header + payload bytes moved so far
  bool queued = false;                 // guarded by the core's direction mutex

 private:
  enum State { kPending, kDone, kFailed };
  [[noreturn]] void throwFailure() const;
  [[noreturn]] void throwTimeout(std::chrono::milliseconds timeout) const;

  const std::shared_ptr<ConnectionCore> core_;
  std::atomic<int> state_{kPending};
  std::mutex mu_;
  std::condition_variable cv_;
  Failure failure_;  // written before state_ becomes kFailed; read after
};

// The socket and its two queues. See the threading contract above.
class ConnectionCore {
 public:
  // `tls`: the session the handshake set up on fd, or null for plain TCP.
  ConnectionCore(Fd fd, int peer, uint64_t id, std::unique_ptr<TlsSession> tls = nullptr);
  ~ConnectionCore();

  int peer() const { return peer_; }
  uint64_t id() const { return id_; }
  bool usesTls() const { return usesTls_; }
  int fd() const { return fd_.get(); }

  // Queues the op and, when it is first in line, starts its I/O on the calling thread.
  // On a failed connection the op completes at once with the failure.
  void post(TcpOp* op);
  // I/O thread: the socket reported `events` (EPOLL* bits).
  void onEvents(uint32_t events);
  // ~TcpOp of an op still queued: fails the connection, as the stream is out of step.
  void abandon(TcpOp* op);
  // Fails every pending and future op and closes the socket, first sending an abort
  // frame with `why` when no message is half-sent. Idempotent; never throws.
  void close(const std::string& why, CloseReason reason = CloseReason::kNetwork);

 private:
  // kFailed: a failure was recorded; the caller runs failAll() once it holds no mutex.
  enum class Progress { kIdle, kFailed };
  Progress progressSend();              // requires sendMu_
  Progress progressRecv();              // requires recvMu_
  Progress progressSendTls();           // requires sendMu_
  Progress progressRecvTls();           // requires recvMu_
  void sentBytes(TcpOp* op, size_t done);                      // requires sendMu_
  bool receivedBytes(TcpOp* op, size_t before, size_t done);  // requires recvMu_
  Progress recordTlsFailure(TlsStatus status, const std::string& why);
  Progress progress(TcpOp::Kind kind);  // requires that direction's mutex
  bool checkHeader(TcpOp* op);          // requires recvMu_; false on a mismatch
  void readAbortFrame(TcpOp* op, size_t received);  // requires recvMu_
  void sendAbortFrame(const std::string& why, CloseReason reason);  // requires sendMu_
  void recordFailure(Failure failure);
  FailKind failureKind() const;
  // Shuts the socket down (so the peer sees the failure too) and fails both queues.
  void failAll();
  void failQueue(std::deque<TcpOp*>& queue);  // requires that queue's mutex
  Failure failureForOp() const;
  std::mutex& mutexFor(TcpOp::Kind kind) { return kind == TcpOp::Kind::kSend ? sendMu_ : recvMu_; }

  const int peer_;
  const uint64_t id_;
  const bool usesTls_;  // tls_ was set at construction (tls_ itself is reset by close())
  std::mutex sendMu_;
  std::deque<TcpOp*> sendQueue_;  // guarded by sendMu_
  std::mutex recvMu_;
  std::deque<TcpOp*> recvQueue_;  // guarded by recvMu_
  std::atomic<bool> failed_{false};
  mutable std::mutex failureMu_;
  Failure failure_;      // guarded by failureMu_; first failure wins
  bool closed_ = false;  // guarded by sendMu_ and recvMu_ (both to write)
  Fd fd_;                // closed in close(), with both mutexes held
  std::unique_ptr<TlsSession> tls_;  // null: plain TCP; freed in close() like fd_
};

// The Connection handed to users: posts ops on the core; closes it on destruction.
class TcpConnection final : public Connection {
 public:
  TcpConnection(std::shared_ptr<ConnectionCore> core, std::shared_ptr<class IoLoop> loop);
  ~TcpConnection() override;
  int peer() const override { return core_->peer(); }
  std::unique_ptr<PendingOp> postSend(const void* data, size_t numBytes, uint64_t tag) override;
  std::unique_ptr<PendingOp> postRecv(void* data, size_t numBytes, uint64_t tag) override;
  void close(const std::string& why, CloseReason reason) override { core_->close(why, reason); }
  bool encrypted() const override { return core_->usesTls(); }

 private:
  std::shared_ptr<ConnectionCore> core_;
  std::shared_ptr<IoLoop> loop_;
};

}  // namespace strata::transport::tcp
