// A Connection (transport/transport.h) to one rank of this host through shared memory,
// with the TCP connection's semantics, carried by two single-producer/single-consumer rings
// per peer pair in the group's shared region (transport.h lays the region out: a doorbell
// page per rank, then one ring per local peer, each a control page and ringBytes of data).
//
// A message is the TCP frame: a 16-byte header {tag, numBytes} and the payload, copied into
// the ring chunk by chunk (ring_plan.h) as the consumer frees space, and copied out into
// the receiver's buffer: one copy in, one copy out, no staging.
//
// Semantics (as tcp/connection.h): ordered; the header is checked against the receive
// (MismatchError naming both tags and sizes; the link is unusable after that); every wait
// has a timeout (TimeoutError); a peer whose process is gone (PeerInfo::pid) is a
// NetworkError naming it; close(why, reason) writes the reason into the outbound ring's
// close word, so the peer's pending and later ops fail with the matching error type once
// the bytes already in the ring are consumed; destroying a pending op fails the link.
//
// Progress: an op moves bytes on the posting thread when it is first in line, on the
// thread that waits on it, and on the transport's progress thread (eager sends larger than
// the free space, which the pipeline never waits on before the step ends). Whoever moves
// bytes rings the peer's doorbell (a futex word in shared memory) so its sleeping waiter or
// progress thread wakes; sleeps are bounded (kLinkSleep) for the liveness and timeout checks.
//
// Threading: as tcp/connection.h: sends and receives may be posted from different
// threads; a direction's ring is touched under that direction's mutex only; lock order is
// direction mutex, then failureMu_ or an op's mu_.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "transport/shm/doorbell.h"
#include "transport/transport.h"

namespace strata::transport::shm {

class Region;
class ConnectionCore;
class ShmTransport;

// The bell and each ring's control block take a page of the region.
constexpr size_t kLinkPageBytes = 4096;
// Bound on a doorbell sleep, so liveness, close and timeouts are checked this often.
constexpr std::chrono::microseconds kLinkSleep{1000};

// Why a link failed (the TCP connection's kinds, minus those of sockets).
enum class FailKind { kNone, kPeerDied, kMismatch, kAfterMismatch, kClosedLocally, kAbandoned, kPeerClosed };

struct Failure {
  FailKind kind = FailKind::kNone;
  std::string detail;
  uint64_t gotTag = 0;  // kMismatch: the header that arrived
  uint64_t gotBytes = 0;
  CloseReason peerReason = CloseReason::kNetwork;  // kPeerClosed
};

// A posted send or receive on a shared-memory link.
class ShmOp final : public PendingOp {
 public:
  enum class Kind { kSend, kRecv };
  ShmOp(std::shared_ptr<ConnectionCore> core, Kind kind, void* data, size_t numBytes, uint64_t tag);
  ~ShmOp() override;
  void wait(std::chrono::milliseconds timeout) override;
  bool done() override { return state_.load(std::memory_order_acquire) != kPending; }

  // Called by the core holding the op's direction mutex.
  void complete();
  void completeWithError(Failure failure);

  const Kind kind;
  uint8_t* const data;
  const size_t numBytes;
  const uint64_t tag;
  uint64_t header[2];         // {tag, numBytes}: sent, or the one received
  size_t transferred = 0;     // header + payload bytes moved; guarded by the direction mutex
  bool queued = false;        // guarded by the direction mutex

 private:
  enum State { kPending, kDone, kFailed };
  [[noreturn]] void throwFailure() const;
  [[noreturn]] void throwTimeout(std::chrono::milliseconds timeout) const;

  const std::shared_ptr<ConnectionCore> core_;
  std::atomic<int> state_{kPending};
  std::mutex mu_;
  Failure failure_;  // written before state_ becomes kFailed
};

// The two rings of one peer pair and their queues.
class ConnectionCore {
 public:
  // A ring's control block in shared memory, the first page of its slot.
  struct Ring {
    alignas(64) std::atomic<uint64_t> head{0};  // written by the producer only
    alignas(64) std::atomic<uint64_t> tail{0};  // written by the consumer only
    // Written by the producer only: 0 open, else 1 + CloseReason, after `reason`.
    alignas(64) std::atomic<uint32_t> closed{0};
    char reason[1024];
  };
  using Bell = Doorbell;
  // `region` holds the rings; the core keeps it mapped while ops may still touch them.
  ConnectionCore(std::shared_ptr<Region> region, int peer, pid_t peerPid, Ring* out, uint8_t* outData, Ring* in,
                 uint8_t* inData, size_t ringBytes, Bell* myBell, Bell* peerBell,
                 std::chrono::microseconds yield = std::chrono::microseconds(0));

  int peer() const { return peer_; }
  std::chrono::microseconds yieldWindow() const { return yield_; }
  void post(ShmOp* op);
  // Moves what it can in `kind`'s direction, taking its mutex (blocking when `wait`, else
  // only if free); true when bytes moved or an op ended.
  bool progress(ShmOp::Kind kind, bool wait);
  // Whether ops are queued (the progress thread's question).
  bool pending();
  // Fails the link if the peer closed it or its process is gone (at most every ms).
  void checkPeer();
  // Our doorbell's value, read before looking for work; sleepOnBell(seen) then sleeps until
  // a peer rings it (or it rang since) or `limit` passes.
  uint32_t bellValue() const;
  void sleepOnBell(uint32_t seen, std::chrono::microseconds limit);
  void abandon(ShmOp* op);
  void close(const std::string& why, CloseReason reason);

 private:
  enum class Step { kIdle, kMoved, kFailed };
  Step progressSend();  // requires sendMu_
  Step progressRecv();  // requires recvMu_
  bool checkHeader(ShmOp* op);  // requires recvMu_
  // Ends the op at the front of `queue` once all its bytes moved. Requires its mutex.
  void completeIfWhole(std::deque<ShmOp*>& queue);
  void ringPeer();
  void recordFailure(Failure failure);
  // Fails both queues; tells the peer unless the failure is a mismatch (then the owner
  // closes with its reason). Requires neither direction mutex.
  void failAll();
  void failQueue(std::deque<ShmOp*>& queue);
  Failure failureForOp() const;
  void writeCloseWord(const std::string& why, CloseReason reason);

  const std::shared_ptr<Region> region_;
  const int peer_;
  const pid_t peerPid_;
  Ring* const out_;
  uint8_t* const outData_;
  Ring* const in_;
  uint8_t* const inData_;
  const size_t ringBytes_;
  const size_t chunkBytes_;
  Bell* const myBell_;
  Bell* const peerBell_;
  const std::chrono::microseconds yield_;
  std::mutex sendMu_;
  std::deque<ShmOp*> sendQueue_;
  std::mutex recvMu_;
  std::deque<ShmOp*> recvQueue_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> told_{false};  // our close word is written
  mutable std::mutex failureMu_;
  Failure failure_;
  std::atomic<int64_t> lastLivenessUs_{0};
};

// The Connection to one local peer, made by ShmTransport::connect. It must be destroyed
// before its transport (the communicator declares the transport first); its ops may
// outlive both.
class ShmConnection final : public Connection {
 public:
  ShmConnection(std::shared_ptr<ConnectionCore> core, ShmTransport* transport)
      : core_(std::move(core)), transport_(transport) {}
  ~ShmConnection() override;
  int peer() const override { return core_->peer(); }
  std::unique_ptr<PendingOp> postSend(const void* data, size_t numBytes, uint64_t tag) override;
  std::unique_ptr<PendingOp> postRecv(void* data, size_t numBytes, uint64_t tag) override;
  void close(const std::string& why, CloseReason reason) override { core_->close(why, reason); }

 private:
  std::unique_ptr<PendingOp> post(ShmOp::Kind kind, void* data, size_t numBytes, uint64_t tag);
  std::shared_ptr<ConnectionCore> core_;
  ShmTransport* transport_;
};

static_assert(sizeof(ConnectionCore::Ring) <= kLinkPageBytes, "a ring's control block fits its page");
static_assert(sizeof(ConnectionCore::Bell) <= kLinkPageBytes, "the doorbell fits its page");

}  // namespace strata::transport::shm
