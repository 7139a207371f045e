#include <gtest/gtest.h>

#include <vector>

#include "collectives/param_slices.h"

namespace strata::collectives {
namespace {

bool operator==(const ParamSlice& a, const ParamSlice& b) {
  return a.param == b.param && a.paramOffset == b.paramOffset && a.bucketOffset == b.bucketOffset &&
         a.count == b.count;
}

TEST(ParamSlices, HandWorkedTwoBuckets) {
  // Bucket 0: p0 [0,10), p1 [10,30); bucket 1: p2 [0,16). My shards: [8,24) of bucket 0, [16,32) of
  // bucket 1 (past p2: nothing).
  const std::vector<ParamPlace> places{{0, 0, 10}, {0, 10, 20}, {1, 0, 16}};
  const auto slices = sliceParameters(places, {Range{8, 16}, Range{16, 16}});
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_TRUE(slices[0] == (ParamSlice{0, 8, 8, 2}));
  EXPECT_TRUE(slices[1] == (ParamSlice{1, 0, 10, 14}));
}

// Every element of every parameter belongs to exactly one rank's slices, at the right place,
// for shards as the reduce-scatter cuts them.
TEST(ParamSlices, RanksCoverEveryElementOnce) {
  const std::vector<size_t> sizes{104, 13, 91, 7, 28, 4, 0, 1};
  const std::vector<int> bucketOf{0, 0, 1, 1, 1, 2, 2, 2};
  std::vector<ParamPlace> places;
  std::vector<size_t> bucketSize(3, 0);
  for (size_t i = 0; i < sizes.size(); ++i) {
    places.push_back({bucketOf[i], bucketSize[static_cast<size_t>(bucketOf[i])], sizes[i]});
    bucketSize[static_cast<size_t>(bucketOf[i])] += sizes[i];
  }
  for (int parts : {1, 2, 3, 4, 7}) {
    std::vector<std::vector<int>> seen;
    for (size_t s : sizes) seen.emplace_back(s, 0);
    for (int r = 0; r < parts; ++r) {
      std::vector<Range> shards;
      for (size_t b = 0; b < 3; ++b) shards.push_back(shardOf(bucketSize[b], parts, r, shardAlignElems(8)));
      for (const ParamSlice& s : sliceParameters(places, shards)) {
        const ParamPlace& p = places[static_cast<size_t>(s.param)];
        EXPECT_EQ(s.bucketOffset, p.offset + s.paramOffset);
        const Range& shard = shards[static_cast<size_t>(p.bucket)];
        EXPECT_GE(s.bucketOffset, shard.offset);
        EXPECT_LE(s.bucketOffset + s.count, shard.end());
        EXPECT_GT(s.count, 0u);
        for (size_t e = 0; e < s.count; ++e) ++seen[static_cast<size_t>(s.param)][s.paramOffset + e];
      }
    }
    for (size_t i = 0; i < sizes.size(); ++i)
      for (size_t e = 0; e < sizes[i]; ++e) EXPECT_EQ(seen[i][e], 1) << "parts " << parts << " param " << i;
  }
}

TEST(ParamSlices, BucketOutOfRangeIsAnError) {
  EXPECT_THROW(sliceParameters({{2, 0, 4}}, {Range{0, 4}}), std::exception);
}

}  // namespace
}  // namespace strata::collectives
