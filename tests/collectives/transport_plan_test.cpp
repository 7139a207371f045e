// Which transports a group sets up (collectives/transport_plan.h): a table of layouts and
// options against the shared-memory domain, the TCP mesh and each peer's point-to-point
// kind; the options' error messages; then a group of ranks as threads on two pretend hosts
// whose links carry a ring of messages over both kinds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/transport_plan.h"
#include "core/errors.h"
#include "testing/rank_harness.h"

namespace strata::collectives {
namespace {

using namespace std::chrono_literals;
using transport::Kind;

constexpr Kind kNone = Kind::kNone;
constexpr Kind kShm = Kind::kShm;
constexpr Kind kTcp = Kind::kTcp;

struct PlanCase {
  const char* what;
  std::vector<int> hostOfRank;
  int rank;
  std::string transport;  // CommOptions::transport
  std::string p2p;        // CommOptions::p2pTransport
  bool connectTcp;
  bool shmDomain;
  bool tcpMesh;
  std::vector<Kind> p2pKinds;
};

std::vector<transport::PeerInfo> peersOf(const std::vector<int>& hostOfRank) {
  std::vector<transport::PeerInfo> peers;
  for (size_t r = 0; r < hostOfRank.size(); ++r)
    peers.push_back({static_cast<int>(r), "h" + std::to_string(hostOfRank[r]), hostOfRank[r], 0});
  return peers;
}

TransportPlan plan(const std::vector<int>& hostOfRank, int rank, const std::string& transport,
                   const std::string& p2p, bool connectTcp = true) {
  CommOptions o;
  o.transport = transport;
  o.p2pTransport = p2p;
  o.connectTcp = connectTcp;
  return planTransports(buildTopology(rank, hostOfRank), peersOf(hostOfRank), o);
}

TEST(TransportPlan, DomainMeshAndLinksFollowTheLayoutAndTheOptions) {
  const std::vector<PlanCase> cases = {
      {"two hosts", {0, 0, 1, 1}, 1, "auto", "auto", true, true, true, {kShm, kNone, kTcp, kTcp}},
      {"p2p forced to tcp", {0, 0, 0}, 0, "auto", "tcp", true, true, true, {kNone, kTcp, kTcp}},
      {"transport tcp: no shared memory", {0, 0, 0}, 0, "tcp", "auto", true, false, true, {kNone, kTcp, kTcp}},
      {"one host without a mesh", {0, 0, 0}, 2, "auto", "auto", false, true, false, {kShm, kShm, kNone}},
      {"one rank per host needs the mesh", {0, 1}, 0, "auto", "auto", false, false, true, {kNone, kTcp}},
      {"alone", {0}, 0, "auto", "auto", true, false, false, {kNone}},
      {"shm forced on one host", {0, 0}, 1, "shm", "auto", false, true, false, {kShm, kNone}},
      {"tcp forced builds the mesh", {0, 0}, 0, "tcp", "auto", false, false, true, {kNone, kTcp}},
      {"uneven hosts", {3, 7, 3}, 2, "auto", "auto", true, true, true, {kShm, kTcp, kNone}},
  };
  for (const PlanCase& c : cases) {
    const TransportPlan p = plan(c.hostOfRank, c.rank, c.transport, c.p2p, c.connectTcp);
    EXPECT_EQ(p.shmDomain, c.shmDomain) << c.what;
    EXPECT_EQ(p.tcpMesh, c.tcpMesh) << c.what;
    EXPECT_EQ(p.p2p, c.p2pKinds) << c.what;
  }
}

std::string configErrorOf(const std::vector<int>& hostOfRank, const std::string& transport,
                          const std::string& p2p) {
  try {
    plan(hostOfRank, 0, transport, p2p);
  } catch (const ConfigError& e) {
    return e.what_without_backtrace();
  }
  return "no ConfigError";
}

TEST(TransportPlan, BadOptionsAreConfigErrorsNamingTheValue) {
  EXPECT_NE(configErrorOf({0, 0}, "udp", "auto").find(R"(transport "udp" is not one of "auto", "shm", "tcp")"),
            std::string::npos);
  EXPECT_NE(configErrorOf({0, 1}, "shm", "auto").find(R"(transport "shm" was forced but the group spans 2 hosts)"),
            std::string::npos);
  EXPECT_NE(configErrorOf({0, 0}, "auto", "shm")
                .find(R"(p2p transport "shm" (STRATA_P2P_TRANSPORT) is not one of "auto", "tcp")"),
            std::string::npos);
  EXPECT_EQ(configErrorOf({0, 0}, "shm", "tcp"), "no ConfigError");
}

// Message i from rank `from`: bytes that differ per message, per position and per sender.
std::vector<uint8_t> pattern(int from, int i, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  for (size_t k = 0; k < bytes; ++k) v[k] = static_cast<uint8_t>(k * 31 + static_cast<size_t>(i) * 7 + from);
  return v;
}

TEST(TransportPlan, LocalPeersUseShmRemoteOnesTcpAndBothCarryMessages) {
  for (const char* p2p : {"auto", "tcp"}) {
    testing::HarnessOptions opts;
    opts.kind = testing::TransportKind::kHierarchical;
    opts.numHosts = 2;
    opts.adjust = [&](int, CommOptions& o) { o.p2pTransport = p2p; };
    testing::runRanks(4, opts, [&](Communicator& comm) {
      for (int peer = 0; peer < comm.size(); ++peer) {
        if (peer == comm.rank()) continue;
        const bool local = comm.topology().hostOf[peer] == comm.topology().hostOf[comm.rank()];
        const Kind want = local && std::string(p2p) == "auto" ? kShm : kTcp;
        EXPECT_EQ(comm.p2pLink(peer), want) << "peer " << peer << " with " << p2p;
      }
      // A ring of messages: to the next rank (the other host for 1 -> 2 and 3 -> 0).
      const int next = (comm.rank() + 1) % comm.size();
      const int prev = (comm.rank() + comm.size() - 1) % comm.size();
      const auto msg = pattern(comm.rank(), 0, 5 << 20);
      auto send = comm.postSend(msg.data(), msg.size(), next, 7);
      std::vector<uint8_t> got(msg.size());
      comm.postRecv(got.data(), got.size(), prev, 7)->wait(20s);
      send->wait(20s);
      EXPECT_EQ(got, pattern(prev, 0, got.size()));
    });
  }
}

}  // namespace
}  // namespace strata::collectives
