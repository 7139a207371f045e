#include <gtest/gtest.h>

#include "collectives/bucket_assignment.h"

namespace strata::collectives {
namespace {

std::vector<ParamInfo> floats(std::vector<size_t> bytes) {
  std::vector<ParamInfo> out;
  for (size_t b : bytes) out.push_back(ParamInfo{b, DType::kFloat32});
  return out;
}

TEST(BucketAssignment, ReverseOrderWithSmallFirstBucket) {
  // Ready order 4,3,2,1,0; first cap 100, cap 250.
  const auto buckets = assignBuckets(floats({100, 100, 100, 60, 60}), {}, 100, 250);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].params, (std::vector<int>{4}));        // 60 (+60 would exceed 100)
  EXPECT_EQ(buckets[1].params, (std::vector<int>{3, 2}));     // 60 + 100 = 160 (+100 > 250)
  EXPECT_EQ(buckets[2].params, (std::vector<int>{1, 0}));     // 200
  EXPECT_EQ(buckets[2].numBytes, 200u);
}

TEST(BucketAssignment, EveryParameterExactlyOnce) {
  std::vector<size_t> sizes;
  for (int i = 0; i < 57; ++i) sizes.push_back(static_cast<size_t>((i * 37) % 300 + 1));
  const auto buckets = assignBuckets(floats(sizes), {}, 128, 1000);
  std::vector<int> seen(sizes.size(), 0);
  for (const auto& b : buckets) {
    size_t total = 0;
    for (int p : b.params) {
      ++seen[p];
      total += sizes[p];
    }
    EXPECT_EQ(total, b.numBytes);
    if (b.params.size() > 1) {
      EXPECT_LE(b.numBytes, 1000u);
    }
  }
  for (int s : seen) EXPECT_EQ(s, 1);
}

TEST(BucketAssignment, OversizedParameterGetsItsOwnBucket) {
  const auto buckets = assignBuckets(floats({10, 5000, 10}), {0, 1, 2}, 100, 100);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[1].params, (std::vector<int>{1}));
}

TEST(BucketAssignment, DtypesNeverMix) {
  std::vector<ParamInfo> params{{8, DType::kFloat32}, {8, DType::kFloat64}, {8, DType::kFloat32}, {8, DType::kFloat64}};
  const auto buckets = assignBuckets(params, {0, 1, 2, 3}, 100, 100);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].params, (std::vector<int>{0, 2}));
  EXPECT_EQ(buckets[1].params, (std::vector<int>{1, 3}));
  EXPECT_EQ(buckets[1].dtype, DType::kFloat64);
}

TEST(BucketAssignment, ObservedOrderIsFollowed) {
  const auto buckets = assignBuckets(floats({10, 10, 10}), {1, 0, 2}, 15, 100);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].params, (std::vector<int>{1}));
  EXPECT_EQ(buckets[1].params, (std::vector<int>{0, 2}));
}

}  // namespace
}  // namespace strata::collectives
