#include "collectives/topology.h"

#include <algorithm>
#include <map>

#include <c10/util/StringUtil.h>

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

}  // namespace strata::collectives
