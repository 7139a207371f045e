// Rank layout of hybrid pipeline x data parallelism: world = p * d ranks.
//
//   cluster (smp's default): the ranks of one pipeline are adjacent.
//            pp_rank = rank % p, dp_rank = rank / p.
//            8 ranks, p = 2: pipelines [0,1] [2,3] [4,5] [6,7]; dp groups [0,2,4,6] [1,3,5,7].
//   spread:  the ranks of one data-parallel group are adjacent.
//            pp_rank = rank / d, dp_rank = rank % d.
//            8 ranks, p = 2: pipelines [0,4] [1,5] [2,6] [3,7]; dp groups [0,1,2,3] [4,5,6,7].
// Both match smp's placement_strategy example (its mp_group / dp_group lists). cluster keeps
// the pipeline's point-to-point traffic on one host when hosts hold consecutive ranks; spread
// keeps the data-parallel AllReduce on one host instead.
#pragma once

#include <string>
#include <vector>

namespace strata::pipeline {

enum class Placement { kCluster, kSpread };

// "cluster" | "spread"; anything else throws strata::ConfigError naming placement_strategy.
Placement parsePlacement(const std::string& name);
const char* placementName(Placement placement);

struct Topology {
  int worldSize = 1;
  int partitions = 1;        // p = pp size
  int dataParallelSize = 1;  // d = dp size
  Placement placement = Placement::kCluster;
  std::vector<int> ppRankOf;                     // index = global rank
  std::vector<int> dpRankOf;                     // index = global rank
  std::vector<std::vector<int>> pipelineGroups;  // [dp rank] -> global ranks by pp rank
  std::vector<std::vector<int>> dataParallelGroups;  // [pp rank] -> global ranks by dp rank

  int rankOf(int ppRank, int dpRank) const { return pipelineGroups.at(dpRank).at(ppRank); }
};

// Throws strata::ConfigError when worldSize < 1, partitions < 1, or partitions does not
// divide worldSize (naming both numbers).
Topology makeTopology(int worldSize, int partitions, Placement placement);

}  // namespace strata::pipeline
