// Point-to-point links between ranks of one host through shared memory: a Connection
// (transport/transport.h) with the TCP connection's semantics, carried by two
// single-producer/single-consumer rings per peer pair.
//
// Layout: one SharedRegion (shared_buffers.h) per group, created with the group. Local
// rank r's part holds
//
//   [bell page: doorbell word, sleeper count]
//   [ring from local peer 0: control page (head, tail, close word + reason) | ringBytes]
//   [ring from local peer 1 ...]                         one ring per local peer
//
// so each rank reads its inbound rings from its own part and writes its outbound ones into
// the peers' parts. A message is the TCP frame: a 16-byte header {tag, numBytes} and the
// payload, copied into the ring chunk by chunk (p2p_link_plan.h) as the consumer frees
// space, and copied out into the receiver's buffer: one copy in, one copy out, no staging.
//
// Semantics (as tcp/connection.h): ordered; the header is checked against the receive
// (MismatchError naming both tags and sizes; the link is unusable after that); every wait
// has a timeout (TimeoutError); a peer whose process is gone (PeerInfo::pid) is a
// NetworkError naming it; close(why, reason) writes the reason into the outbound ring's
// close word, so the peer's pending and later ops fail with the matching error type once
// the bytes already in the ring are consumed; destroying a pending op fails the link.
//
// Progress: an op moves bytes on the posting thread when it is first in line, on the
// thread that waits on it, and on the set's progress thread (eager sends larger than the
// free space, which the pipeline never waits on before the step ends). Whoever moves bytes
// rings the peer's doorbell (a futex word in shared memory) so its sleeping waiter or
// progress thread wakes; sleeps are bounded (1 ms) for the liveness and timeout checks.
//
// Threading: as tcp/connection.h: sends and receives may be posted from different
// threads; a direction's ring is touched under that direction's mutex only; lock order is
// direction mutex, then failureMu_ or an op's mu_.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/doorbell.h"
#include "transport/transport.h"

namespace strata::collectives {

class ShmDomain;
class SharedRegion;
class ShmLinkCore;

// Why a link failed (the TCP connection's kinds, minus those of sockets).
enum class LinkFail { kNone, kPeerDied, kMismatch, kAfterMismatch, kClosedLocally, kAbandoned, kPeerClosed };

struct LinkFailure {
  LinkFail kind = LinkFail::kNone;
  std::string detail;
  uint64_t gotTag = 0;  // kMismatch: the header that arrived
  uint64_t gotBytes = 0;
  transport::CloseReason peerReason = transport::CloseReason::kNetwork;  // kPeerClosed
};

// A posted send or receive on a shared-memory link.
class ShmLinkOp final : public transport::PendingOp {
 public:
  enum class Kind { kSend, kRecv };
  ShmLinkOp(std::shared_ptr<ShmLinkCore> core, Kind kind, void* data, size_t numBytes, uint64_t tag);
  ~ShmLinkOp() override;
  void wait(std::chrono::milliseconds timeout) override;
  bool done() override { return state_.load(std::memory_order_acquire) != kPending; }

  // Called by the core holding the op's direction mutex.
  void complete();
  void completeWithError(LinkFailure failure);

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

  const std::shared_ptr<ShmLinkCore> core_;
  std::atomic<int> state_{kPending};
  std::mutex mu_;
  LinkFailure failure_;  // written before state_ becomes kFailed
};

// The two rings of one peer pair and their queues.
class ShmLinkCore {
 public:
  struct Ring;  // shared-memory control block (shm_link.cpp)
  using Bell = Doorbell;
  // `region` holds the rings; the core keeps it mapped while ops may still touch them.
  ShmLinkCore(std::shared_ptr<SharedRegion> region, int peer, pid_t peerPid, Ring* out, uint8_t* outData, Ring* in,
              uint8_t* inData, size_t ringBytes, Bell* myBell, Bell* peerBell,
              std::chrono::microseconds yield = std::chrono::microseconds(0));

  int peer() const { return peer_; }
  std::chrono::microseconds yieldWindow() const { return yield_; }
  void post(ShmLinkOp* op);
  // Moves what it can in `kind`'s direction, taking its mutex (blocking when `wait`, else
  // only if free); true when bytes moved or an op ended.
  bool progress(ShmLinkOp::Kind kind, bool wait);
  // Whether ops are queued (the progress thread's question).
  bool pending();
  // Fails the link if the peer closed it or its process is gone (at most every ms).
  void checkPeer();
  // Our doorbell's value, read before looking for work; sleepOnBell(seen) then sleeps until
  // a peer rings it (or it rang since) or `limit` passes.
  uint32_t bellValue() const;
  void sleepOnBell(uint32_t seen, std::chrono::microseconds limit);
  void abandon(ShmLinkOp* op);
  void close(const std::string& why, transport::CloseReason reason);

 private:
  enum class Step { kIdle, kMoved, kFailed };
  Step progressSend();  // requires sendMu_
  Step progressRecv();  // requires recvMu_
  bool checkHeader(ShmLinkOp* op);  // requires recvMu_
  void ringPeer();
  void recordFailure(LinkFailure failure);
  // Fails both queues; tells the peer unless the failure is a mismatch (then the owner
  // closes with its reason). Requires neither direction mutex.
  void failAll();
  void failQueue(std::deque<ShmLinkOp*>& queue);
  LinkFailure failureForOp() const;
  void writeCloseWord(const std::string& why, transport::CloseReason reason);

  const std::shared_ptr<SharedRegion> region_;
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
  std::deque<ShmLinkOp*> sendQueue_;
  std::mutex recvMu_;
  std::deque<ShmLinkOp*> recvQueue_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> told_{false};  // our close word is written
  mutable std::mutex failureMu_;
  LinkFailure failure_;
  std::atomic<int64_t> lastLivenessUs_{0};
};

class ShmLinkSet;

// The Connection the communicator hands out for a local peer. It must be destroyed before
// its ShmLinkSet (the communicator declares the set first); its ops may outlive both.
class ShmConnection final : public transport::Connection {
 public:
  ShmConnection(std::shared_ptr<ShmLinkCore> core, ShmLinkSet* set) : core_(std::move(core)), set_(set) {}
  ~ShmConnection() override;
  int peer() const override { return core_->peer(); }
  std::unique_ptr<transport::PendingOp> postSend(const void* data, size_t numBytes, uint64_t tag) override;
  std::unique_ptr<transport::PendingOp> postRecv(void* data, size_t numBytes, uint64_t tag) override;
  void close(const std::string& why, transport::CloseReason reason) override { core_->close(why, reason); }

 private:
  std::unique_ptr<transport::PendingOp> post(ShmLinkOp::Kind kind, void* data, size_t numBytes, uint64_t tag);
  std::shared_ptr<ShmLinkCore> core_;
  ShmLinkSet* set_;
};

// The shared-memory links of one group on this host and their progress thread.
class ShmLinkSet {
 public:
  // Collective over the domain's local ranks. `localRanks[i]` is the group rank of local
  // rank i and `pids[i]` its process; `ringBytes` from p2pRingBytes.
  // `yield`: how long a wait keeps the core after its spin before it sleeps (p2pYieldUs).
  ShmLinkSet(ShmDomain& domain, const std::vector<int>& localRanks, const std::vector<pid_t>& pids, size_t ringBytes,
             std::chrono::microseconds yield = std::chrono::microseconds(0));
  ~ShmLinkSet();
  ShmLinkSet(const ShmLinkSet&) = delete;
  ShmLinkSet& operator=(const ShmLinkSet&) = delete;

  size_t ringBytes() const { return ringBytes_; }
  // The connection to group rank `peer` (a local peer). Call once per peer.
  std::unique_ptr<transport::Connection> connection(int peer);
  // An op could not finish at once: make sure the progress thread runs.
  void kick();

 private:
  void run();

  std::shared_ptr<SharedRegion> region_;
  size_t ringBytes_;
  std::vector<int> localRanks_;
  std::vector<std::shared_ptr<ShmLinkCore>> cores_;  // by local index; null for self
  ShmLinkCore::Bell* myBell_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  bool kicked_ = false;  // guarded by mu_
  bool stop_ = false;    // guarded by mu_
  std::thread thread_;   // started at the first kick
};

}  // namespace strata::collectives
