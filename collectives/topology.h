// The host layout of a group: which ranks share a host, from each member's hostIndex
// (transport::PeerInfo). Pure; the communicator, the transport plan and the algorithms read it.
#pragma once

#include <string>
#include <vector>

namespace strata::collectives {

struct GroupTopology {
  int rank = 0;
  int worldSize = 1;
  std::vector<int> hostOf;          // host index (dense, 0..numHosts-1) per rank
  std::vector<int> localRanks;      // ranks on my host, ascending
  int localIndex = 0;               // my position in localRanks
  std::vector<int> crossHostRanks;  // per host, the rank with my local index (-1 if none)
  int numHosts = 1;
  int maxLocalSize = 1;
  bool uniformLocalSize = true;
  std::string describe() const;
};
GroupTopology buildTopology(int rank, const std::vector<int>& hostIndexOfRank);

}  // namespace strata::collectives
