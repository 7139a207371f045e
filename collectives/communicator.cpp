#include "collectives/communicator.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "collectives/hierarchical_allreduce.h"
#include "collectives/shm_algorithms.h"
#include "collectives/shm_direct.h"
#include "collectives/shm_domain.h"
#include "collectives/transport_plan.h"
#include "core/errors.h"
#include "core/logging.h"
#include "transport/shm/ring_plan.h"

namespace strata::collectives {

std::string GroupTopology::describe() const {
  std::string text = c10::str("ranks=", worldSize, " hosts=", numHosts, " local_ranks=[");
  for (size_t i = 0; i < localRanks.size(); ++i) text += c10::str(i ? "," : "", localRanks[i]);
  return text + c10::str("] local_index=", localIndex, uniformLocalSize ? "" : " (uneven hosts)");
}

GroupTopology buildTopology(int rank, const std::vector<int>& hostIndexOfRank) {
  GroupTopology t;
  t.rank = rank;
  t.worldSize = static_cast<int>(hostIndexOfRank.size());
  // Dense host numbering in order of first appearance by rank (emplace keeps the first).
  std::map<int, int> dense;
  for (int h : hostIndexOfRank) dense.emplace(h, static_cast<int>(dense.size()));
  std::vector<std::vector<int>> byHost(dense.size());
  for (int r = 0; r < t.worldSize; ++r) {
    t.hostOf.push_back(dense.at(hostIndexOfRank[r]));
    byHost[t.hostOf[r]].push_back(r);
  }
  t.numHosts = static_cast<int>(byHost.size());
  t.localRanks = byHost[t.hostOf[rank]];
  t.localIndex = static_cast<int>(std::find(t.localRanks.begin(), t.localRanks.end(), rank) -
                                  t.localRanks.begin());
  for (const auto& ranks : byHost) {
    t.maxLocalSize = std::max(t.maxLocalSize, static_cast<int>(ranks.size()));
    if (ranks.size() != byHost[0].size()) t.uniformLocalSize = false;
    t.crossHostRanks.push_back(t.localIndex < static_cast<int>(ranks.size()) ? ranks[t.localIndex] : -1);
  }
  return t;
}

Communicator::Communicator(GroupTopology topo, const CommOptions& opts)
    : topo_(std::move(topo)), opts_(opts) {}

void Communicator::setCallersWaiting(std::shared_ptr<const std::atomic<int>> callersWaiting) {
  if (shm_) shm_->setCallersWaiting(std::move(callersWaiting));
}

Communicator::~Communicator() {
  if (opts_.flight) opts_.flight->releaseLane(flightLane_);
}

std::unique_ptr<Communicator> Communicator::create(std::shared_ptr<bootstrap::Store> store, int rank,
                                                   std::vector<transport::PeerInfo> peers,
                                                   const CommOptions& opts) {
  std::vector<int> hostIndex;
  for (const auto& p : peers) hostIndex.push_back(p.hostIndex);
  std::unique_ptr<Communicator> c(new Communicator(buildTopology(rank, hostIndex), opts));
  c->store_ = store;
  if (opts.flight) c->joinFlightRecorder();
  const GroupTopology& t = c->topo_;
  const TransportPlan plan = planTransports(t, peers, opts);
  if (plan.shmDomain) {
    ShmDomainOptions so;
    so.slotBytes = opts.shmSlotBytes;
    so.spinsBeforeYield = opts.shmSpinsBeforeYield;
    so.timeout = opts.timeout;
    auto hostStore = bootstrap::makePrefixStore(c10::str("host", t.hostOf[rank]), store);
    c->shm_ = ShmDomain::create(*hostStore, t.localIndex, t.localRanks, so);
  }
  if (c->opts_.chunkBytes == 0) {
    const int cores = c->shm_ ? c->shm_->coresOfDomain() : 1;
    c->opts_.chunkBytes = defaultChunkBytes(opts.shmSlotBytes, static_cast<int>(t.localRanks.size()), cores);
  }
  if (c->opts_.directBlockBytes == 0) c->opts_.directBlockBytes = defaultDirectBlockBytes();
  // The TCP mesh first (every other rank), then the point-to-point links of other kinds
  // (shared memory: this host's ranks), each collective over the ranks it joins.
  if (plan.tcpMesh) {
    std::vector<int> others;
    for (int r = 0; r < t.worldSize; ++r)
      if (r != rank) others.push_back(r);
    c->connect(transport::Kind::kTcp, peers, others);
    LinkSet& cross = c->crossLinks_;
    cross.timeout = opts.timeout;
    for (int r : t.crossHostRanks) {
      if (r < 0) continue;
      if (r == rank) cross.self = cross.size();
      cross.conns.push_back(r == rank ? nullptr : c->link(transport::Kind::kTcp, r));
      cross.memberRanks.push_back(r);
    }
  }
  c->p2pLinks_ = plan.p2p;
  std::vector<int> shmPeers;
  for (int r = 0; r < t.worldSize; ++r)
    if (plan.p2p[r] == transport::Kind::kShm) shmPeers.push_back(r);
  if (!shmPeers.empty()) c->connect(transport::Kind::kShm, peers, shmPeers);
  STRATA_LOG(kInfo, kInit, "group ", t.describe(), " shm=", c->shm_ ? "on" : "off",
             " tcp_connections=", c->tcpLinks().empty() ? 0 : t.worldSize - 1, " p2p_shm_links=", shmPeers.size());
  return c;
}

transport::TransportOptions Communicator::transportOptions() const {
  transport::TransportOptions to;
  to.timeout = opts_.timeout;
  to.jobSecret = opts_.jobSecret;
  to.encryptInterHost = opts_.encryptInterHost;
  to.advertiseHost = opts_.advertiseHost;
  to.bindHost = opts_.bindHost;
  if (shm_) {
    const int localSize = static_cast<int>(topo_.localRanks.size());
    to.localPeers = shm_.get();
    to.ringBytes = transport::shm::p2pRingBytes(localSize, opts_.p2pRingBytes);
    to.yield = std::chrono::microseconds(
        transport::shm::p2pYieldUs(localSize, shm_->coresOfDomain(), opts_.p2pYieldUs));
  }
  return to;
}

void Communicator::connect(transport::Kind kind, const std::vector<transport::PeerInfo>& peers,
                           const std::vector<int>& ranks) {
  auto& made = transports_[transport::kindIndex(kind)];
  made = transport::builtinRegistry().entry(kind).make(transportOptions());
  std::vector<transport::PeerInfo> targets;
  for (int r : ranks) targets.push_back(peers[r]);
  auto conns = made->connect(*store_, peers[topo_.rank], targets);
  auto& links = links_[transport::kindIndex(kind)];
  links.resize(peers.size());
  for (size_t i = 0; i < ranks.size(); ++i) links[ranks[i]] = std::move(conns[i]);
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

// A failure record in the group's store: "<kind>|<rank>|<message>".
constexpr const char* kFailureKey = "failure/first";
constexpr const char* kFailureClaimKey = "failure/claimed";
// Reading a failure record must not hang on a store whose host died.
constexpr std::chrono::milliseconds kFailureRecordTimeout{2000};

char kindOf(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const MismatchError&) {
    return 'M';
  } catch (const TimeoutError&) {
    return 'T';
  } catch (...) {
    return 'N';
  }
}

ShmDomain::AbortKind abortKindOf(char kind) {
  return kind == 'M' ? ShmDomain::AbortKind::kMismatch
                     : kind == 'T' ? ShmDomain::AbortKind::kTimeout : ShmDomain::AbortKind::kNetwork;
}

// The flight recorder's name for a failure of kind 'M', 'T' or 'N' (see kindOf);
// `ownError`, when this rank failed first, tells a dead peer from another error.
std::string flightTrigger(char kind, const std::exception_ptr* ownError) {
  if (kind == 'M') return "mismatch";
  if (kind == 'T') return "timeout";
  if (ownError == nullptr) return "network";
  try {
    std::rethrow_exception(*ownError);
  } catch (const NetworkError&) {
    return "network";
  } catch (...) {
    return "error";
  }
}

std::string messageOf(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

void Communicator::closeConnections(const std::string& why, transport::CloseReason reason) {
  for (auto& conns : links_)
    for (auto& conn : conns)
      if (conn) conn->close(why, reason);
}

void Communicator::failAndRethrow(const CollSignature& sig, std::exception_ptr error) {
  const char kind = kindOf(error);
  const std::string mine = messageOf(error);
  STRATA_LOG(kError, kColl, describe(sig), " failed: ", mine);
  // 1. The first rank to fail records why, before its peers can notice anything.
  std::string firstRecord;
  try {
    if (store_->add(kFailureClaimKey, 1) == 1) {
      bootstrap::setString(*store_, kFailureKey, c10::str(kind, "|", topo_.rank, "|", mine));
    } else {
      firstRecord = bootstrap::getString(*store_, kFailureKey, kFailureRecordTimeout);
    }
  } catch (const std::exception&) {
    // The store went down with its host: our own error is all there is to report.
  }
  const size_t bar1 = firstRecord.find('|'), bar2 = firstRecord.find('|', bar1 + 1);
  const bool secondary = bar1 != std::string::npos && bar2 != std::string::npos &&
                         firstRecord.substr(bar1 + 1, bar2 - bar1 - 1) != std::to_string(topo_.rank);
  const std::string text =
      secondary ? c10::str(describe(sig), " failed because rank ", firstRecord.substr(bar1 + 1, bar2 - bar1 - 1),
                           " failed first: ", firstRecord.substr(bar2 + 1), " (here: ", mine, ")")
                : mine;
  const char finalKind = secondary ? firstRecord[0] : kind;
  failure_ = text;  // written once, before failed_ publishes it to other threads
  lostPeer_ = finalKind != 'M' && finalKind != 'T';
  failed_ = true;
  // 2. The flight recorder's dump, before the peers are told: they may exit (and a
  // launcher kill this rank) as soon as they know.
  reportFlightFailure(flightTrigger(finalKind, secondary ? nullptr : &error), describe(sig), text);
  // 3. Peers on this host and peers over TCP fail at once instead of timing out.
  if (shm_) shm_->abort(-1, text, abortKindOf(finalKind));
  closeConnections(text, finalKind == 'M'   ? transport::CloseReason::kMismatch
                         : finalKind == 'T' ? transport::CloseReason::kTimeout
                                            : transport::CloseReason::kNetwork);
  // 4. A secondary failure reports the first one, with its error type.
  if (!secondary) std::rethrow_exception(error);
  switch (firstRecord[0]) {
    case 'M': STRATA_THROW(MismatchError, text);
    case 'T': STRATA_THROW(TimeoutError, text);
    default: STRATA_THROW(NetworkError, text);
  }
}

void Communicator::abort(const std::string& reason) {
  failure_ = reason;
  lostPeer_ = true;  // the peers see this rank as gone
  failed_ = true;
  if (shm_) shm_->abort(topo_.rank, reason);
  closeConnections(c10::str("rank ", topo_.rank, " aborted the group: ", reason), transport::CloseReason::kNetwork);
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
