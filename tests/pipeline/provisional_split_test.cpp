// The provisional split that decides which layers each pipeline rank profiles: contiguous,
// non-empty, covering every layer once; even by count when nothing is known; with parameter
// bytes, the largest block is as small as any contiguous split's (brute force).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "core/errors.h"
#include "pipeline/provisional_split.h"

namespace strata::pipeline {
namespace {

void expectCoversAllLayers(const std::vector<LayerRange>& ranges, int numLayers, int partitions) {
  ASSERT_EQ(ranges.size(), static_cast<size_t>(partitions));
  int next = 0;
  for (const LayerRange& r : ranges) {
    EXPECT_EQ(r.begin, next);
    EXPECT_GT(r.numLayers(), 0);
    next = r.end;
  }
  EXPECT_EQ(next, numLayers);
}

size_t largestBlock(const std::vector<LayerRange>& ranges, const std::vector<size_t>& bytes) {
  size_t worst = 0;
  for (const LayerRange& r : ranges) {
    size_t sum = 0;
    for (int i = r.begin; i < r.end; ++i) sum += bytes[static_cast<size_t>(i)];
    worst = std::max(worst, sum);
  }
  return worst;
}

// Every contiguous split into `parts` non-empty blocks: the smallest largest block.
size_t bruteForceBest(const std::vector<size_t>& bytes, int parts) {
  const int n = static_cast<int>(bytes.size());
  size_t best = std::numeric_limits<size_t>::max();
  std::vector<LayerRange> ranges;
  const std::function<void(int, int)> search = [&](int begin, int left) {
    if (left == 1) {
      ranges.push_back({begin, n});
      best = std::min(best, largestBlock(ranges, bytes));
      ranges.pop_back();
      return;
    }
    for (int end = begin + 1; end <= n - (left - 1); ++end) {
      ranges.push_back({begin, end});
      search(end, left - 1);
      ranges.pop_back();
    }
  };
  search(0, parts);
  return best;
}

TEST(ProvisionalSplit, EvenByCountWhenNothingIsKnown) {
  EXPECT_EQ(provisionalSplit(8, 2), (std::vector<LayerRange>{{0, 4}, {4, 8}}));
  // 10 blocks + embedding + head on 4 ranks: the first two ranks hold one layer more.
  EXPECT_EQ(provisionalSplit(12, 5), (std::vector<LayerRange>{{0, 3}, {3, 6}, {6, 8}, {8, 10}, {10, 12}}));
  EXPECT_EQ(provisionalSplit(3, 3), (std::vector<LayerRange>{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(provisionalSplit(5, 1), (std::vector<LayerRange>{{0, 5}}));
  // All-zero sizes (layers without parameters) are "nothing known".
  EXPECT_EQ(provisionalSplit(4, 2, {0, 0, 0, 0}), (std::vector<LayerRange>{{0, 2}, {2, 4}}));
  for (int n = 1; n <= 9; ++n)
    for (int p = 1; p <= n; ++p) expectCoversAllLayers(provisionalSplit(n, p), n, p);
}

TEST(ProvisionalSplit, ByBytesTheLargestBlockIsTheSmallestPossible) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 9);
    const int p = 1 + static_cast<int>(rng() % static_cast<unsigned>(n));
    std::vector<size_t> bytes(static_cast<size_t>(n));
    for (auto& b : bytes) b = rng() % 4 == 0 ? 0 : 1 + rng() % 1000;  // some layers hold nothing
    if (std::all_of(bytes.begin(), bytes.end(), [](size_t b) { return b == 0; })) bytes[0] = 1;
    const std::vector<LayerRange> ranges = provisionalSplit(n, p, bytes);
    expectCoversAllLayers(ranges, n, p);
    EXPECT_EQ(largestBlock(ranges, bytes), bruteForceBest(bytes, p)) << "trial " << trial << " n=" << n << " p=" << p;
  }
  // A big embedding and head around small blocks: they end up on ranks of their own.
  EXPECT_EQ(provisionalSplit(6, 3, {100, 10, 10, 10, 10, 100}),
            (std::vector<LayerRange>{{0, 1}, {1, 5}, {5, 6}}));
}

TEST(ProvisionalSplit, RefusesImpossibleRequests) {
  EXPECT_THROW(provisionalSplit(3, 4), ConfigError);
  EXPECT_THROW(provisionalSplit(3, 0), ConfigError);
  EXPECT_THROW(provisionalSplit(3, 2, {1, 2}), ConfigError);
}

}  // namespace
}  // namespace strata::pipeline
