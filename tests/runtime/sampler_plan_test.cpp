#include <gtest/gtest.h>

#include <set>

#include "runtime/sampler_plan.h"

namespace strata::data {
namespace {

TEST(SamplerPlan, ShardsAreDisjointAndCoverTheData) {
  for (int world : {1, 2, 3, 4}) {
    std::multiset<size_t> all;
    for (int r = 0; r < world; ++r) {
      const auto mine = shardIndices({1000, r, world, 7, 0, true, true});
      EXPECT_EQ(mine.size(), 1000u / world);
      all.insert(mine.begin(), mine.end());
    }
    EXPECT_EQ(std::set<size_t>(all.begin(), all.end()).size(), all.size()) << "duplicates with drop_last";
    EXPECT_GE(all.size(), 1000u - world + 1);
  }
}

TEST(SamplerPlan, PaddingGivesEveryRankTheSameCount) {
  std::set<size_t> covered;
  for (int r = 0; r < 3; ++r) {
    const auto mine = shardIndices({10, r, 3, 1, 0, false, false});
    EXPECT_EQ(mine.size(), 4u);
    covered.insert(mine.begin(), mine.end());
  }
  EXPECT_EQ(covered.size(), 10u);  // every sample seen; two of them twice (padding)
  EXPECT_EQ(shardIndices({10, 0, 3, 1, 0, false, false}), (std::vector<size_t>{0, 3, 6, 9}));
  EXPECT_EQ(shardIndices({10, 2, 3, 1, 0, false, false}), (std::vector<size_t>{2, 5, 8, 1}));
}

TEST(SamplerPlan, OrderChangesWithTheEpochAndRepeatsWithTheSeed) {
  const auto e0 = shardIndices({500, 1, 2, 42, 0, true, false});
  const auto e1 = shardIndices({500, 1, 2, 42, 1, true, false});
  EXPECT_NE(e0, e1);
  EXPECT_EQ(e0, shardIndices({500, 1, 2, 42, 0, true, false}));
  EXPECT_NE(e0, shardIndices({500, 1, 2, 43, 0, true, false}));
}

TEST(SamplerPlan, EmptyDataset) {
  EXPECT_TRUE(shardIndices({0, 0, 2, 1, 0, true, false}).empty());
}

}  // namespace
}  // namespace strata::data
