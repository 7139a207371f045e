#include <gtest/gtest.h>

#include <algorithm>

#include "collectives/optimizer_partition.h"

namespace strata::collectives {
namespace {

// A naive reference of the same rule: repeatedly pick the largest unassigned parameter
// (lowest index on ties) and give it to the lightest rank (lowest rank on ties).
std::vector<int> naivePartition(const std::vector<size_t>& bytes, int parts) {
  std::vector<int> owner(bytes.size(), -1);
  std::vector<size_t> load(static_cast<size_t>(parts), 0);
  for (size_t round = 0; round < bytes.size(); ++round) {
    size_t pick = bytes.size();
    for (size_t i = 0; i < bytes.size(); ++i)
      if (owner[i] < 0 && (pick == bytes.size() || bytes[i] > bytes[pick])) pick = i;
    int lightest = 0;
    for (int r = 1; r < parts; ++r)
      if (load[static_cast<size_t>(r)] < load[static_cast<size_t>(lightest)]) lightest = r;
    owner[pick] = lightest;
    load[static_cast<size_t>(lightest)] += bytes[pick];
  }
  return owner;
}

TEST(OptimizerPartition, HandWorkedExample) {
  // Sorted: 400(1) 300(3) 200(0) 200(4) 100(2); two ranks.
  // 400->0, 300->1, 200(0)->1 (300<400), 200(4)->0 (400<500), 100->1 (500<600).
  const std::vector<size_t> bytes{200, 400, 100, 300, 200};
  EXPECT_EQ(partitionParameters(bytes, 2), (std::vector<int>{1, 0, 1, 1, 0}));
  EXPECT_EQ(bytesPerPart(bytes, partitionParameters(bytes, 2), 2), (std::vector<size_t>{600, 600}));
}

TEST(OptimizerPartition, OneRankOwnsEverything) {
  const std::vector<size_t> bytes{8, 16, 0, 4};
  EXPECT_EQ(partitionParameters(bytes, 1), (std::vector<int>{0, 0, 0, 0}));
}

TEST(OptimizerPartition, MoreRanksThanParametersLeavesRanksEmpty) {
  const std::vector<size_t> bytes{10, 30, 20};
  const auto owner = partitionParameters(bytes, 5);
  EXPECT_EQ(owner, (std::vector<int>{2, 0, 1}));
  EXPECT_EQ(bytesPerPart(bytes, owner, 5), (std::vector<size_t>{30, 20, 10, 0, 0}));
  EXPECT_TRUE(partitionParameters({}, 4).empty());
}

TEST(OptimizerPartition, MatchesNaiveReferenceAndBalances) {
  for (int parts : {1, 2, 3, 4, 7})
    for (size_t n : {size_t{1}, size_t{5}, size_t{13}, size_t{64}}) {
      std::vector<size_t> bytes;
      for (size_t i = 0; i < n; ++i) bytes.push_back((i * 7919 + 13) % 97 * 8 + (i % 3 == 0 ? 8 : 0));
      const auto owner = partitionParameters(bytes, parts);
      ASSERT_EQ(owner, naivePartition(bytes, parts)) << "parts=" << parts << " n=" << n;
      const auto load = bytesPerPart(bytes, owner, parts);
      // Greedy-by-size bound: the heaviest rank exceeds the lightest by at most one parameter.
      const size_t spread = *std::max_element(load.begin(), load.end()) - *std::min_element(load.begin(), load.end());
      EXPECT_LE(spread, *std::max_element(bytes.begin(), bytes.end())) << "parts=" << parts << " n=" << n;
      size_t total = 0;
      for (size_t b : load) total += b;
      size_t expected = 0;
      for (size_t b : bytes) expected += b;
      EXPECT_EQ(total, expected);
    }
}

TEST(OptimizerPartition, RejectsZeroParts) { EXPECT_THROW(partitionParameters({1, 2}, 0), std::invalid_argument); }

}  // namespace
}  // namespace strata::collectives
