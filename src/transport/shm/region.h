// Shared regions: memory in which every local rank of a group owns a part of the same size
// and maps every peer's part. The shared-memory links keep their rings in one
// (transport.h); the collectives' shared buffers are regions too
// (collectives/shared_buffers.h).
//
// Layout of one region (its own POSIX shm segment, created by local rank 0, unlinked as
// soon as every local rank has mapped it, so nothing outlives the processes):
//
//   [part of local rank 0][part of local rank 1]...   each partBytes, page aligned
//
// Each owner pre-faults its own part (first touch places the pages near it) and every rank
// populates its page tables for the peers' parts at creation, so no later access takes a
// page fault. Without local peers a region is private anonymous memory with the same
// interface.
//
// Lifetime: a region lives while someone holds it; unmapping is local and never blocks. The
// memory returns to the system when every local rank has unmapped it.
//
// Threading: regions are immutable after creation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace strata::transport::shm {

// The ranks of one host that create regions together, as the region needs them: who they
// are, a name for the segments, a barrier and a way to fail it. The collectives' ShmDomain
// is one (collectives/shm_domain.h).
//
// Threading: one caller thread at a time (the creator's).
class LocalPeers {
 public:
  virtual ~LocalPeers() = default;
  virtual int localRank() const = 0;
  virtual int localSize() const = 0;
  // A name every local rank knows and no other group uses; regions derive theirs from it.
  virtual const std::string& name() const = 0;
  // Returns once every local rank has called it; throws (TimeoutError, NetworkError) when one
  // does not arrive or failed. `what` names the step in errors.
  virtual void syncAll(const char* what) = 0;
  // Makes every local rank's current and next syncAll throw NetworkError with `reason`.
  virtual void fail(const std::string& reason) = 0;
};

class Region {
 public:
  // Private memory (no local peers).
  static std::shared_ptr<Region> createPrivate(uint64_t id, size_t numBytes) {
    return make<Region>(nullptr, id, numBytes);
  }
  // Collective over the local ranks, which must pass the same id and size. Throws
  // NetworkError (failing the peers too) when the segment cannot be made.
  static std::shared_ptr<Region> createShared(LocalPeers& peers, uint64_t id, size_t numBytes) {
    return make<Region>(&peers, id, numBytes);
  }
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  uint64_t id() const { return id_; }
  size_t size() const { return numBytes_; }  // usable bytes of each part
  int localSize() const { return localSize_; }
  int localRank() const { return localRank_; }
  // Whether the peers map this memory (false: a private allocation).
  bool peerMapped() const { return localSize_ > 1; }
  uint8_t* part(int local) const { return base_ + static_cast<size_t>(local) * partBytes_; }
  uint8_t* mine() const { return part(localRank_); }
  // Whether [data, data + numBytes) lies inside this rank's part.
  bool contains(const void* data, size_t numBytes) const;

 protected:
  Region(uint64_t id, size_t numBytes, int localSize, int localRank);
  // Makes an R (a Region, or a handle derived from it, such as collectives' SharedRegion,
  // which befriends Region) and maps it: private memory without `peers`, else shared.
  template <typename R>
  static std::shared_ptr<R> make(LocalPeers* peers, uint64_t id, size_t numBytes) {
    std::shared_ptr<R> r(new R(id, numBytes, peers ? peers->localSize() : 1, peers ? peers->localRank() : 0));
    if (peers) {
      r->mapShared(*peers);
    } else {
      r->mapPrivate();
    }
    return r;
  }

 private:
  void mapPrivate();
  void mapShared(LocalPeers& peers);  // collective, as createShared
  void map(int fd);

  uint64_t id_;
  size_t numBytes_;
  size_t partBytes_;
  int localSize_;
  int localRank_;
  uint8_t* base_ = nullptr;
  size_t mappedBytes_ = 0;
};

}  // namespace strata::transport::shm
