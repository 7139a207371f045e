// Which transports a group sets up: a pure function of the group's layout and options,
// carried out by Communicator::create.
//
//   shared-memory domain  among this host's ranks, for the shared-memory collectives, when
//                         the host has several of the group's ranks and the transport option
//                         (collectives.transport, STRATA_TRANSPORT) is not "tcp";
//   TCP mesh              a connection to every other rank, for the TCP collectives and the
//                         hierarchical AllReduce's inter-host phase, when the group spans
//                         hosts, the option is "tcp", or the caller wants one (connectTcp);
//   point-to-point links  per peer, the transport registry's choice (transport/registry.h)
//                         among the kinds STRATA_P2P_TRANSPORT allows: "auto" enables shared
//                         memory (when the domain exists) and TCP, "tcp" only TCP.
#pragma once

#include <string>
#include <vector>

#include "collectives/topology.h"
#include "transport/registry.h"
#include "transport/transport.h"

namespace strata::collectives {

struct CommOptions;

struct TransportPlan {
  bool shmDomain = false;
  bool tcpMesh = false;
  std::vector<transport::Kind> p2p;  // by group rank; kNone for self
};

// `peers[r]` describes group rank r. Throws ConfigError naming the option and the value when
// opts.transport or opts.p2pTransport is not a known value, or "shm" is forced on a group
// that spans hosts.
TransportPlan planTransports(const GroupTopology& topo, const std::vector<transport::PeerInfo>& peers,
                             const CommOptions& opts,
                             const transport::Registry& registry = transport::builtinRegistry());

}  // namespace strata::collectives
