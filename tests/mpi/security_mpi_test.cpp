// Encryption only between hosts (docs/security.md), checked on what each connection of the
// world group actually negotiated. STRATA_TEST_EXPECT_TLS=1 says the job asked for encryption
// (security.encrypt_inter_node_traffic or STRATA_TLS=1); STRATA_HOSTS=k makes the hosts.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "collectives/communicator.h"
#include "strata/group.h"
#include "strata/runtime.h"

namespace {

TEST(SecurityMpi, ConnectionsEncryptExactlyBetweenHosts) {
  const char* expect = std::getenv("STRATA_TEST_EXPECT_TLS");
  const bool asked = expect != nullptr && std::string(expect) == "1";
  strata::collectives::Communicator& comm = strata::world().communicator();
  const auto& topo = comm.topology();
  int encrypted = 0;
  int plain = 0;
  for (int peer = 0; peer < topo.worldSize; ++peer) {
    if (peer == topo.rank) continue;
    const strata::transport::Connection* conn = comm.connection(peer);
    ASSERT_NE(conn, nullptr) << "no TCP connection to rank " << peer;
    const bool otherHost = topo.hostOf[peer] != topo.hostOf[topo.rank];
    EXPECT_EQ(conn->encrypted(), asked && otherHost)
        << "rank " << topo.rank << " to rank " << peer << (otherHost ? " (another host)" : " (same host)");
    (conn->encrypted() ? encrypted : plain)++;
  }
  // The layouts registered in CMakeLists.txt have both kinds where they can.
  if (asked && topo.numHosts > 1) {
    EXPECT_GT(encrypted, 0);
  }
  if (topo.localRanks.size() > 1) {
    EXPECT_GT(plain, 0);
  }
}

}  // namespace
