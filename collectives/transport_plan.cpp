#include "collectives/transport_plan.h"

#include <optional>

#include "collectives/communicator.h"
#include "core/errors.h"

namespace strata::collectives {

using transport::Kind;

TransportPlan planTransports(const GroupTopology& topo, const std::vector<transport::PeerInfo>& peers,
                             const CommOptions& opts, const transport::Registry& registry) {
  std::string valid = "\"auto\"";
  for (const transport::KindEntry& e : registry.kinds()) valid += c10::str(", \"", e.name, "\"");
  const std::optional<Kind> forced = registry.named(opts.transport);
  STRATA_CHECK_WITH(ConfigError, opts.transport == "auto" || forced, "transport \"", opts.transport,
                    "\" is not one of ", valid);
  STRATA_CHECK_WITH(ConfigError, !(forced == Kind::kShm && topo.numHosts > 1), "transport \"", opts.transport,
                    "\" was forced but the group spans ", topo.numHosts, " hosts");
  STRATA_CHECK_WITH(ConfigError, opts.p2pTransport == "auto" || registry.named(opts.p2pTransport) == Kind::kTcp,
                    "p2p transport \"", opts.p2pTransport, "\" (STRATA_P2P_TRANSPORT) is not one of \"auto\", \"tcp\"");
  TransportPlan plan;
  plan.shmDomain = topo.localRanks.size() > 1 && forced != Kind::kTcp;
  plan.tcpMesh = topo.worldSize > 1 && (opts.connectTcp || topo.numHosts > 1 || forced == Kind::kTcp);
  std::vector<Kind> enabled = {Kind::kTcp};
  if (plan.shmDomain && opts.p2pTransport == "auto") enabled.push_back(Kind::kShm);
  plan.p2p = transport::chooseKinds(registry, enabled, peers[static_cast<size_t>(topo.rank)], peers);
  return plan;
}

}  // namespace strata::collectives
