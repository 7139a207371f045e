// Rank layouts: smp's placement_strategy example, and every rank in exactly one group of each kind.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/errors.h"
#include "pipeline/topology.h"

namespace strata::pipeline {
namespace {

using Groups = std::vector<std::vector<int>>;

// smd_model_parallel_general.rst: 8 processes, partitions = 2.
TEST(Topology, ClusterMatchesSmpExample) {
  const Topology t = makeTopology(8, 2, Placement::kCluster);
  EXPECT_EQ(t.dataParallelSize, 4);
  EXPECT_EQ(t.pipelineGroups, (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(t.dataParallelGroups, (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(t.ppRankOf, (std::vector<int>{0, 1, 0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(t.dpRankOf, (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
}

TEST(Topology, SpreadMatchesSmpExample) {
  const Topology t = makeTopology(8, 2, Placement::kSpread);
  EXPECT_EQ(t.pipelineGroups, (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(t.dataParallelGroups, (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(t.ppRankOf, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(t.dpRankOf, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
}

TEST(Topology, EveryRankOnceInEachKindOfGroup) {
  for (Placement placement : {Placement::kCluster, Placement::kSpread})
    for (int world : {1, 2, 3, 4, 6, 8, 12})
      for (int p = 1; p <= world; ++p) {
        if (world % p != 0) continue;
        const Topology t = makeTopology(world, p, placement);
        std::set<int> inPipelines, inDp;
        for (size_t dp = 0; dp < t.pipelineGroups.size(); ++dp)
          for (size_t pp = 0; pp < t.pipelineGroups[dp].size(); ++pp) {
            const int rank = t.pipelineGroups[dp][pp];
            EXPECT_TRUE(inPipelines.insert(rank).second);
            EXPECT_EQ(t.ppRankOf[static_cast<size_t>(rank)], static_cast<int>(pp));
            EXPECT_EQ(t.dpRankOf[static_cast<size_t>(rank)], static_cast<int>(dp));
            EXPECT_EQ(t.rankOf(static_cast<int>(pp), static_cast<int>(dp)), rank);
          }
        for (const auto& group : t.dataParallelGroups)
          for (int rank : group) EXPECT_TRUE(inDp.insert(rank).second);
        EXPECT_EQ(static_cast<int>(inPipelines.size()), world);
        EXPECT_EQ(static_cast<int>(inDp.size()), world);
        EXPECT_EQ(static_cast<int>(t.pipelineGroups.size()), world / p);
        EXPECT_EQ(static_cast<int>(t.dataParallelGroups.size()), p);
      }
}

TEST(Topology, WorldNotDivisibleByPartitionsNamesBoth) {
  try {
    makeTopology(6, 4, Placement::kCluster);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("partitions=4 does not divide the world size 6"), std::string::npos) << e.what();
  }
  EXPECT_THROW(makeTopology(0, 1, Placement::kCluster), ConfigError);
  EXPECT_THROW(makeTopology(4, 0, Placement::kCluster), ConfigError);
  EXPECT_THROW(parsePlacement("packed"), ConfigError);
  EXPECT_EQ(parsePlacement("spread"), Placement::kSpread);
  EXPECT_STREQ(placementName(Placement::kCluster), "cluster");
}

}  // namespace
}  // namespace strata::pipeline
