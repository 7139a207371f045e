// The shared-memory segment of the ranks of one host, and the synchronisation they use.
//
// Layout (one POSIX shm segment, created by local rank 0, pre-faulted, unlinked as soon
// as every local rank has mapped it, so a crash leaves nothing behind in /dev/shm):
//
//   [Header: magic, sizes, abort word]            one page
//   [RankCtl x localSize: flag, signatures, pid]  one cache line per field group
//   [slots: localSize x 2 buffers x slotBytes]    staging buffers, double-buffered
//
// Synchronisation: each rank owns a monotonically increasing flag (epoch) in its own
// cache line; syncAll() publishes the next epoch with release order and waits, with
// acquire order, until every local peer has published it. Buffers alternate between two
// sets (nextBuffer()), so consecutive collectives need no trailing barrier: a rank only
// rewrites a buffer after a sync that its peers publish once they are done reading it.
//
// Waiting spins, then yields (at once when ranks outnumber cores), and checks every
// millisecond or so the abort word, the timeout and whether the peers' processes exist,
// so a killed peer or a stuck one becomes a NetworkError/TimeoutError on every rank.
// Unless the rank's compute thread wants the core: when collectives run on a background
// thread (strata::Group's communication thread) and no thread of the rank waits for them
// (setCallersWaiting), a wait spins only ~20 us and then sleeps on the peer's doorbell
// (transport/shm/doorbell.h, a futex the peer rings with each new epoch), so it takes almost no time from
// the computation it overlaps.
//
// Threading: one caller thread at a time per domain (the group serialises collectives).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/store.h"
#include "collectives/signature.h"
#include "transport/shm/region.h"

namespace strata::collectives {

// Upper bound on the local ranks a domain serves (algorithms keep per-rank pointers on
// the stack).
constexpr int kMaxLocalRanks = 256;

struct ShmDomainOptions {
  size_t slotBytes = 1 << 20;                    // bytes per staging buffer per rank
  std::chrono::milliseconds timeout{300000};
  int spinsBeforeYield = -1;                     // -1: decide from cores vs local ranks
};

// Spins before a waiting rank yields its core: many when every local rank has a core of its
// own (a flag handoff takes well under a microsecond), few when ranks outnumber the cores of
// the domain (the union of the local ranks' affinities), since the peer may need our core.
int spinsForCores(int localSize, int coresOfDomain);

// The domain is also the LocalPeers that shared regions are created among (the shared
// buffers here, the point-to-point links' rings in transport/shm/transport.h).
class ShmDomain final : public transport::shm::LocalPeers {
 public:
  // Collective over the local ranks: `globalRanks[i]` is the group rank of local rank i.
  // Keys are namespaced by `store` (pass a PrefixStore per group). Throws StoreError /
  // TimeoutError / NetworkError naming the segment or the missing rank.
  static std::unique_ptr<ShmDomain> create(bootstrap::Store& store, int localRank,
                                           std::vector<int> globalRanks,
                                           const ShmDomainOptions& opts);
  ~ShmDomain() override;
  ShmDomain(const ShmDomain&) = delete;
  ShmDomain& operator=(const ShmDomain&) = delete;

  int localRank() const override { return localRank_; }
  int localSize() const override { return static_cast<int>(globalRanks_.size()); }
  size_t slotBytes() const { return slotBytes_; }
  // Cores the local ranks may run on together (the union of their affinities).
  int coresOfDomain() const { return coresOfDomain_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // The segment's name, known to every local rank (shared buffers derive theirs from it).
  const std::string& name() const override { return name_; }
  void setTimeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  // The count of the rank's threads waiting for collectives (see the top of this file); null:
  // every wait counts as awaited (spin, then yield). Set before any collective.
  void setCallersWaiting(std::shared_ptr<const std::atomic<int>> callersWaiting) {
    callersWaiting_ = std::move(callersWaiting);
  }

  // Staging buffer `buffer` (0 or 1) of local rank `local`.
  uint8_t* slot(int local, int buffer) const;
  // The buffer set the next staged step uses; alternates on every call.
  int nextBuffer() { return static_cast<int>(bufferCounter_++ & 1); }

  // Publishes this rank's signature of the collective about to run (before its first
  // sync); checkSignatures() after that sync compares every peer's with ours and throws
  // MismatchError naming the first differing rank and both calls.
  void publishSignature(const CollSignature& sig);
  void checkSignatures(const CollSignature& sig);

  // Publishes the next epoch and waits until every local peer has reached it.
  // `what` names the operation in error messages.
  void syncAll(const char* what) override;

  // What kind of error the first failing rank hit, so every rank rethrows the same type.
  enum class AbortKind : int32_t { kNetwork = 0, kTimeout = 1, kMismatch = 2 };
  // Marks the domain failed for every local rank (blamed: a group rank, or -1).
  void abort(int blamedRank, const std::string& reason, AbortKind kind = AbortKind::kNetwork);
  // LocalPeers: an abort blaming nobody in particular.
  void fail(const std::string& reason) override { abort(-1, reason); }

 private:
  struct Header;
  struct RankCtl;
  ShmDomain(int localRank, std::vector<int> globalRanks, const ShmDomainOptions& opts);
  void mapSegment(const std::string& name, bool create);
  void waitForPeer(int peer, uint64_t epoch, const char* what);
  // Whether a thread of the rank waits for the collective (so spinning costs it nothing).
  bool awaited() const { return !callersWaiting_ || callersWaiting_->load(std::memory_order_relaxed) > 0; }
  [[noreturn]] void throwAborted();
  RankCtl& ctl(int local) const;
  bool peerProcessAlive(int peer) const;

  int localRank_;
  std::vector<int> globalRanks_;
  size_t slotBytes_;
  std::chrono::milliseconds timeout_;
  int spinsBeforeYield_;
  std::shared_ptr<const std::atomic<int>> callersWaiting_;
  int coresOfDomain_ = 1;
  std::string name_;
  void* base_ = nullptr;
  size_t mappedBytes_ = 0;
  Header* header_ = nullptr;
  uint8_t* slots_ = nullptr;
  uint64_t epoch_ = 0;
  uint64_t bufferCounter_ = 0;
};

}  // namespace strata::collectives
