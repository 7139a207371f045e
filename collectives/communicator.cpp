#include "collectives/communicator.h"

#include <algorithm>
#include <cstring>

#include "collectives/hierarchical_allreduce.h"
#include "collectives/shm_algorithms.h"
#include "collectives/shm_direct.h"
#include "collectives/shm_domain.h"
#include "core/errors.h"
#include "core/logging.h"

namespace strata::collectives {

Communicator::Communicator(GroupTopology topo, const CommOptions& opts)
    : topo_(std::move(topo)), opts_(opts) {}

void Communicator::setCallersWaiting(std::shared_ptr<const std::atomic<int>> callersWaiting) {
  if (shm_) shm_->setCallersWaiting(std::move(callersWaiting));
}

Communicator::~Communicator() {
  if (opts_.flight) opts_.flight->releaseLane(flightLane_);
}

TopologySummary Communicator::summary() const {
  TopologySummary s;
  s.worldSize = topo_.worldSize;
  s.numHosts = topo_.numHosts;
  s.maxLocalSize = topo_.maxLocalSize;
  s.uniformLocalSize = topo_.uniformLocalSize;
  s.shmEnabled = shm_ != nullptr;
  s.tcpEnabled = !links_[transport::kindIndex(transport::Kind::kTcp)].empty();
  s.shmSlotBytes = opts_.shmSlotBytes;
  s.chunkBytes = opts_.chunkBytes;
  return s;
}

LinkSet Communicator::allLinks() {
  LinkSet l;
  l.self = topo_.rank;
  l.timeout = opts_.timeout;
  for (int r = 0; r < topo_.worldSize; ++r) {
    l.conns.push_back(r == topo_.rank ? nullptr : link(transport::Kind::kTcp, r));
    l.memberRanks.push_back(r);
  }
  return l;
}

bool Communicator::useShmOnly() const { return shm_ && topo_.numHosts == 1; }

CollSignature Communicator::nextSignature(CollKind kind, size_t count, DType dtype, ReduceOp op, int root) {
  STRATA_CHECK(isCollectiveDType(dtype), "collectives do not take ", dtypeName(dtype),
               " buffers (float32, float64, float16, bfloat16, int32, int64, uint8)");
  CollSignature sig;
  sig.seq = ++seq_;
  sig.kind = kind;
  sig.count = count;
  sig.dtype = dtype;
  sig.op = op;
  sig.root = root;
  return sig;
}

// Inline here: it is on every collective's path.
flight::Ticket Communicator::flightBegin(const CollSignature& sig, flight::Ticket enqueued) {
  if (flight_ == nullptr) return {};
  if (enqueued.id != 0 && flight_->start(enqueued, sig.seq)) return enqueued;
  flight::OpInfo info;
  info.group = flightGroup_;
  info.seq = sig.seq;
  info.count = sig.count;
  info.numBytes = sig.count * dtypeBytes(sig.dtype);
  info.peer = sig.root;
  info.op = flightOpOf(sig.kind);
  info.dtype = sig.dtype;
  info.reduceOp = sig.op;
  return flight_->record(info, flight::State::kStarted, flightLane_);
}

template <typename Fn>
void Communicator::guarded(const CollSignature& sig, flight::Ticket enqueued, Fn&& fn) {
  const flight::Ticket ticket = flightBegin(sig, enqueued);
  if (failed_.load()) {
    if (flight_) flight_->finish(ticket, false);
    STRATA_THROW(NetworkError, describe(sig), ": the group failed earlier: ", failure_);
  }
  try {
    fn();
  } catch (...) {
    if (flight_) flight_->finish(ticket, false);
    failAndRethrow(sig, std::current_exception());
  }
  if (flight_) flight_->finish(ticket, true);
}

namespace {
// Own pieces for an algorithm that reads only `in`: copied into it first (the caller's
// writable memory, see Communicator::allReduce).
void copyPiecesInto(const void* in, const std::vector<InputPiece>& pieces, size_t elemBytes) {
  for (const InputPiece& p : pieces)
    if (p.count > 0)
      std::memcpy(static_cast<uint8_t*>(const_cast<void*>(in)) + p.offset * elemBytes, p.data, p.count * elemBytes);
}
}  // namespace

void Communicator::allReduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                             flight::Ticket enqueued, const std::vector<InputPiece>& ownPieces) {
  // Before the sequence number is taken: a misuse on one rank must not desynchronise it.
  STRATA_CHECK(ownPieces.empty() || in == out, "allreduce: own input pieces need an in-place call");
  CollSignature sig = nextSignature(CollKind::kAllReduce, count, dtype, op, -1);
  const size_t numBytes = count * dtypeBytes(dtype);
  // In place inside a shared buffer: name the place, so every rank checks that its peers
  // pass the same one, and let the zero-copy algorithms read the peers' copies.
  const SharedPlace place = in == out ? shared_.find(out, numBytes) : SharedPlace{};
  if (place.region) {
    sig.sharedBuffer = place.region->id();
    sig.sharedOffset = place.offset;
  }
  const Placement placement =
      place.region && place.region->peerMapped() ? Placement::kSharedInPlace : Placement::kPrivate;
  guarded(sig, enqueued, [&] {
    if (topo_.worldSize == 1) {
      copyPiecesInto(in, ownPieces, dtypeBytes(dtype));
      if (in != out) std::memmove(out, in, numBytes);
      return;
    }
    chooseAndRunAllReduce(sig, place, placement, in, out, ownPieces);
  });
}

void Communicator::chooseAndRunAllReduce(const CollSignature& sig, const SharedPlace& place, Placement placement,
                                         const void* in, void* out, const std::vector<InputPiece>& ownPieces) {
  const size_t numBytes = sig.count * dtypeBytes(sig.dtype);
  AlgoChoice choice = chooseAllReduce(summary(), numBytes, opts_.allreduceAlgo, placement);
  if (!choice.error.empty()) {
    STRATA_CHECK_WITH(ConfigError, parseAlgo(opts_.allreduceAlgo).has_value(), choice.error,
                      " (valid: ", c10::Join(", ", algoNames()), ")");
    if (!warnedForcedAlgo_) STRATA_LOG(kWarn, kColl, choice.error, "; choosing automatically");
    warnedForcedAlgo_ = true;
    choice = chooseAllReduce(summary(), numBytes, "auto", placement);
  }
  lastAlgo_ = choice.algo;
  STRATA_LOG(kDebug, kColl, describe(sig), " bytes=", numBytes, " algo=", algoName(choice.algo));
  runAllReduce(choice.algo, sig, place, in, out, ownPieces);
}

void Communicator::reduceScatterShared(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                                       flight::Ticket enqueued, const std::vector<InputPiece>& ownPieces) {
  CollSignature sig = nextSignature(CollKind::kReduceScatterShared, count, dtype, op, -1);
  const size_t numBytes = count * dtypeBytes(dtype);
  // Like allReduce's place, for any `out`: every rank must pass the same place in the buffer.
  const SharedPlace place = shared_.find(in, numBytes);
  if (place.region) {
    sig.sharedBuffer = place.region->id();
    sig.sharedOffset = place.offset;
  }
  guarded(sig, enqueued, [&] {
    const int n = topo_.worldSize;
    if (n == 1) {
      copyPiecesInto(in, ownPieces, dtypeBytes(dtype));
      if (in != out) std::memmove(out, in, numBytes);
      return;
    }
    if (useShmOnly() && place.region && place.region->peerMapped()) {
      // Part p is local rank p's; on one host local rank == group rank (buildTopology lists
      // the host's ranks in ascending order), which the shards are numbered by.
      STRATA_CHECK(topo_.localIndex == topo_.rank && static_cast<int>(topo_.localRanks.size()) == n,
                   "reduce_scatter_shared: local rank ", topo_.localIndex, " of ", topo_.localRanks.size(),
                   " is not group rank ", topo_.rank, " of ", n, " on a one-host group");
      return shmDirectReduceScatter(*shm_, sig, place, out, sharedShardOf(count, n, topo_.rank, dtype), dtype, op, n,
                                    ownPieces);
    }
    copyPiecesInto(in, ownPieces, dtypeBytes(dtype));
    if (!shm_) return chooseAndRunAllReduce(sig, place, Placement::kPrivate, in, out);
    // Local peers (several hosts, or `in` outside any peer-mapped buffer): `out` may be memory
    // they share (part(0) of a buffer), where the staged algorithms' partial sums of several
    // ranks would collide. Reduce into private memory, then copy the (identical) result; the
    // sync keeps every rank from returning while a local peer still writes `out`.
    staging_.resize(numBytes);
    chooseAndRunAllReduce(sig, SharedPlace{}, Placement::kPrivate, in, staging_.data());
    if (numBytes > 0) std::memcpy(out, staging_.data(), numBytes);
    shm_->syncAll("reduce_scatter_shared (result copied)");
  });
}

void Communicator::runAllReduce(AllReduceAlgo algo, const CollSignature& sig, const SharedPlace& place,
                                const void* in, void* out, const std::vector<InputPiece>& ownPieces) {
  const size_t count = sig.count;
  const DType dtype = sig.dtype;
  const ReduceOp op = sig.op;
  const int n = topo_.worldSize;
  // Only the direct algorithms read this rank's shard from elsewhere; the rest read `in`.
  if (algo != AllReduceAlgo::kShmDirect && algo != AllReduceAlgo::kHierarchicalDirect)
    copyPiecesInto(in, ownPieces, dtypeBytes(dtype));
  switch (algo) {
    case AllReduceAlgo::kShmOneShot:
      return shmAllReduceOneShot(*shm_, sig, in, out, count, dtype, op, n);
    case AllReduceAlgo::kShmChunked:
      return shmAllReduceChunked(*shm_, sig, in, out, count, dtype, op, n, opts_.chunkBytes);
    case AllReduceAlgo::kShmDirect:
      return shmDirectAllReduce(*shm_, sig, place, count, dtype, op, n, opts_.directBlockBytes, ownPieces);
    case AllReduceAlgo::kTcpDirect: {
      LinkSet l = allLinks();
      return tcpAllReduceDirect(l, sig, in, out, count, dtype, op, n, scratch_);
    }
    case AllReduceAlgo::kTcpRing: {
      LinkSet l = allLinks();
      return tcpAllReduceRing(l, sig, in, out, count, dtype, op, n, scratch_);
    }
    case AllReduceAlgo::kHierarchical:
      return hierarchicalAllReduce(*shm_, crossLinks_, sig, in, out, count, dtype, op, n, opts_.chunkBytes, packed_,
                                   scratch_);
    case AllReduceAlgo::kHierarchicalDirect:
      return hierarchicalDirectAllReduce(*shm_, crossLinks_, sig, place, count, dtype, op, n, scratch_, ownPieces);
  }
}

std::shared_ptr<SharedRegion> Communicator::allocateShared(size_t numBytes) {
  // A fixed count: the sizes are compared below, not by the signature check, so that a
  // mismatch is an ordinary error on every rank and not a failed group.
  const CollSignature sig = nextSignature(CollKind::kAllocateShared, 1, DType::kInt64, ReduceOp::kSum, -1);
  const int64_t mine = static_cast<int64_t>(numBytes);
  std::vector<int64_t> sizes(static_cast<size_t>(topo_.worldSize), mine);
  if (topo_.worldSize > 1) guarded(sig, {}, [&] { allGatherWith(sig, &mine, sizes.data(), 1, DType::kInt64); });
  for (int r = 1; r < topo_.worldSize; ++r) {
    STRATA_CHECK_WITH(MismatchError, sizes[r] == sizes[0], "allocate_shared: rank ", r, " asked for ", sizes[r],
                      " bytes but rank 0 asked for ", sizes[0], " (every rank of the group must pass the same size)");
  }
  std::shared_ptr<SharedRegion> region;
  guarded(sig, {}, [&] {
    region = shm_ ? SharedRegion::createShared(*shm_, sig.seq, numBytes) : SharedRegion::createPrivate(sig.seq, numBytes);
  });
  shared_.add(region);
  return region;
}

void Communicator::broadcast(void* data, size_t count, DType dtype, int root, flight::Ticket enqueued) {
  STRATA_CHECK(root >= 0 && root < topo_.worldSize, "broadcast root ", root, " is not a rank of a group of ",
               topo_.worldSize);
  const CollSignature sig = nextSignature(CollKind::kBroadcast, count, dtype, ReduceOp::kSum, root);
  guarded(sig, enqueued, [&] {
    if (topo_.worldSize == 1) return;
    if (useShmOnly()) return shmBroadcast(*shm_, sig, data, count, dtype, root);
    LinkSet l = allLinks();
    tcpBroadcast(l, sig, data, count, dtype, root);
  });
}

void Communicator::allGather(const void* in, void* out, size_t countPerRank, DType dtype,
                             flight::Ticket enqueued) {
  const CollSignature sig = nextSignature(CollKind::kAllGather, countPerRank, dtype, ReduceOp::kSum, -1);
  guarded(sig, enqueued, [&] { allGatherWith(sig, in, out, countPerRank, dtype); });
}

void Communicator::allGatherWith(const CollSignature& sig, const void* in, void* out, size_t countPerRank,
                                 DType dtype) {
  if (topo_.worldSize == 1) {
    std::memmove(out, in, countPerRank * dtypeBytes(dtype));
    return;
  }
  if (useShmOnly()) return shmAllGather(*shm_, sig, in, out, countPerRank, dtype);
  LinkSet l = allLinks();
  tcpAllGather(l, sig, in, out, countPerRank, dtype);
}

void Communicator::reduceScatter(const void* in, void* out, size_t countPerRank, DType dtype, ReduceOp op,
                                 flight::Ticket enqueued) {
  const CollSignature sig = nextSignature(CollKind::kReduceScatter, countPerRank, dtype, op, -1);
  guarded(sig, enqueued, [&] {
    const int n = topo_.worldSize;
    if (n == 1) {
      std::memmove(out, in, countPerRank * dtypeBytes(dtype));
      return;
    }
    if (useShmOnly()) return shmReduceScatter(*shm_, sig, in, out, countPerRank, dtype, op, n);
    LinkSet l = allLinks();
    tcpReduceScatter(l, sig, in, out, countPerRank, dtype, op, n, scratch_);
  });
}

void Communicator::barrier() {
  const CollSignature sig = nextSignature(CollKind::kBarrier, 0, DType::kUInt8, ReduceOp::kSum, -1);
  guarded(sig, flight::Ticket{}, [&] {
    if (topo_.worldSize == 1) return;
    if (useShmOnly()) return shmBarrier(*shm_, sig);
    LinkSet l = allLinks();
    tcpBarrier(l, sig);
  });
}

flight::Ticket Communicator::startP2p(flight::Op kind, size_t numBytes, int peer, uint64_t tag) {
  const char* toOrFrom = kind == flight::Op::kSend ? "send to" : "recv from";
  STRATA_CHECK(peer >= 0 && peer < topo_.worldSize && peer != topo_.rank, toOrFrom, " invalid peer ", peer,
               " (group of ", topo_.worldSize, ", self ", topo_.rank, ")");
  // Only the TCP mesh is optional (connectTcp); a shared-memory link is made when chosen.
  STRATA_CHECK(link(p2pLinks_[peer], peer) != nullptr, "point-to-point to rank ", peer,
               " needs a TCP connection, which this group was built without");
  if (failed_.load()) STRATA_THROW(NetworkError, toOrFrom, " rank ", peer, ": the group failed earlier: ", failure_);
  return flightP2p(kind, numBytes, peer, tag);
}

std::unique_ptr<transport::PendingOp> Communicator::postSend(const void* data, size_t numBytes, int peer,
                                                             uint64_t tag) {
  const flight::Ticket ticket = startP2p(flight::Op::kSend, numBytes, peer, tag);
  transport::Connection& conn = *link(p2pLinks_[peer], peer);
  return wrapP2p(conn.postSend(data, numBytes, tag), ticket, flight::Op::kSend, numBytes, peer, tag);
}

std::unique_ptr<transport::PendingOp> Communicator::postRecv(void* data, size_t numBytes, int peer,
                                                             uint64_t tag) {
  const flight::Ticket ticket = startP2p(flight::Op::kRecv, numBytes, peer, tag);
  transport::Connection& conn = *link(p2pLinks_[peer], peer);
  return wrapP2p(conn.postRecv(data, numBytes, tag), ticket, flight::Op::kRecv, numBytes, peer, tag);
}

}  // namespace strata::collectives
