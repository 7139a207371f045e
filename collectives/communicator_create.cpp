// How a communicator is made: the group's layout, the transport plan (transport_plan.h)
// carried out: the shared-memory domain, then each transport through its registered factory
// (transport/registry.h), TCP mesh first, then the point-to-point links of other kinds.
#include "collectives/communicator.h"
#include "collectives/shm_domain.h"
#include "collectives/transport_plan.h"
#include "core/errors.h"
#include "core/logging.h"
#include "transport/shm/ring_plan.h"

namespace strata::collectives {

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

}  // namespace strata::collectives
