// Placement of tied tensors across stages and ranks, and the order of contributions.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/errors.h"
#include "pipeline/ties.h"

namespace strata::pipeline {
namespace {

TEST(Ties, PlacementFollowsThePartition) {
  // 6 layers; the embedding (0) and the head (5) share a tensor.
  const struct {
    std::vector<int> stageOfLayer;
    int partitions;
    std::vector<int> stages, ranks;
    int ownerRank;
  } table[] = {
      {{0, 0, 0, 0, 0, 0}, 1, {0}, {0}, 0},           // one stage: one tensor
      {{0, 0, 0, 1, 1, 1}, 2, {0, 1}, {0, 1}, 0},     // first and last stage, two ranks
      {{0, 0, 1, 1, 2, 3}, 4, {0, 3}, {0, 3}, 0},     // p = 4: ranks 0 and 3
      {{0, 1, 1, 2, 2, 3}, 2, {0, 3}, {0, 1}, 0},     // p = 2, v = 2: stage 3 lives on rank 1
      {{0, 0, 0, 1, 1, 1}, 1, {0, 1}, {0}, 0},        // p = 1, v = 2: two stages, one rank
      {{0, 1, 2, 3, 4, 5}, 3, {0, 5}, {0, 2}, 0},     // p = 3, v = 2
  };
  for (const auto& row : table) {
    const TiePlacement t = placeTie({0, 5}, row.stageOfLayer, row.partitions);
    EXPECT_EQ(t.stages, row.stages);
    EXPECT_EQ(t.ranks, row.ranks);
    EXPECT_EQ(t.ownerStage, row.stages.front());
    EXPECT_EQ(t.ownerRank, row.ownerRank);
    EXPECT_EQ(t.acrossStages(), row.stages.size() > 1);
    EXPECT_EQ(t.acrossRanks(), row.ranks.size() > 1);
  }
  EXPECT_THROW(placeTie({0, 6}, {0, 0, 0, 1, 1, 1}, 2), Error);
  EXPECT_THROW(placeTie({}, {0}, 1), Error);
}

TEST(Ties, TheOwnerAddsTheLastStageFirst) {
  EXPECT_EQ(contributionOrder(placeTie({0, 2, 5}, {0, 1, 2, 3, 4, 5}, 6)), (std::vector<int>{5, 2}));
  EXPECT_EQ(contributionOrder(placeTie({0, 1}, {0, 0}, 1)), std::vector<int>{});
}

// A rank holding several contributing stages sends in the order the owner consumes them:
// microbatch ascending, then stage descending, whatever order its backwards ran in.
TEST(Ties, ContributionsAreSentInTheOwnersOrder) {
  std::set<TieContribution> sent{{1, 1}, {0, 1}, {1, 3}, {0, 3}};
  std::vector<std::pair<int, int>> order;
  for (const auto& c : sent) order.emplace_back(c.microbatch, c.stage);
  EXPECT_EQ(order, (std::vector<std::pair<int, int>>{{0, 3}, {0, 1}, {1, 3}, {1, 1}}));
}

}  // namespace
}  // namespace strata::pipeline
