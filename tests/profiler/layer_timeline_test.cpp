// The timing rules of per-layer backward slices and per-bucket AllReduce slices
// (profiler/layer_timeline.h), against hand-worked timelines.
#include <gtest/gtest.h>

#include "profiler/layer_timeline.h"

namespace strata::profiler {
namespace {

TEST(BackwardSlices, ChainOfLayersInReverse) {
  // Three layers; gradients w.r.t. outputs arrive at 100 (last layer), 130, 170; the
  // first layer's parameters are done at 220.
  const BackwardSlices s = backwardSlices({170, 130, 100}, 220);
  ASSERT_EQ(s.layers.size(), 3u);
  EXPECT_EQ(s.layers[0], (LayerInterval{2, {100, 30}}));
  EXPECT_EQ(s.layers[1], (LayerInterval{1, {130, 40}}));
  EXPECT_EQ(s.layers[2], (LayerInterval{0, {170, 50}}));
  ASSERT_TRUE(s.whole.has_value());
  EXPECT_EQ(*s.whole, (TimedRange{100, 120}));
}

TEST(BackwardSlices, LayersBeforeTheFirstDifferentiableOneRunNoBackward) {
  // Layer 0 (e.g. Flatten of the batch) has no gradient; layer 1 is the first
  // differentiable layer and ends with its parameters.
  const BackwardSlices s = backwardSlices({-1, 50, 10}, 90);
  ASSERT_EQ(s.layers.size(), 2u);
  EXPECT_EQ(s.layers[0], (LayerInterval{2, {10, 40}}));
  EXPECT_EQ(s.layers[1], (LayerInterval{1, {50, 40}}));
  EXPECT_EQ(*s.whole, (TimedRange{10, 80}));
}

TEST(BackwardSlices, UnknownEndOfTheFirstLayerLeavesItOut) {
  const BackwardSlices s = backwardSlices({40, 10}, -1);
  ASSERT_EQ(s.layers.size(), 1u);
  EXPECT_EQ(s.layers[0], (LayerInterval{1, {10, 30}}));
  EXPECT_EQ(*s.whole, (TimedRange{10, 30}));
}

TEST(BackwardSlices, NothingDifferentiableGivesNothing) {
  const BackwardSlices s = backwardSlices({-1, -1}, 5);
  EXPECT_TRUE(s.layers.empty());
  EXPECT_FALSE(s.whole.has_value());
  EXPECT_FALSE(backwardSlices({}, 5).whole.has_value());
}

TEST(BackwardSlices, SameMicrosecondGivesZeroLengthNotNegative) {
  const BackwardSlices s = backwardSlices({7, 7}, 6);  // hooks within one µs, clock skew
  ASSERT_EQ(s.layers.size(), 2u);
  EXPECT_EQ(s.layers[0].interval, (TimedRange{7, 0}));
  EXPECT_EQ(s.layers[1].interval, (TimedRange{7, 0}));
  EXPECT_EQ(*s.whole, (TimedRange{7, 0}));
}

TEST(FifoRunIntervals, EachRunStartsAtLaunchOrWhenThePreviousEnded) {
  // Launched at 0, 5, 50; running 10, 10, 4 µs: the second waits for the first.
  const auto v = fifoRunIntervals({{0, 10}, {5, 10}, {50, 4}}, 1000);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0], (TimedRange{0, 10}));
  EXPECT_EQ(v[1], (TimedRange{10, 10}));
  EXPECT_EQ(v[2], (TimedRange{50, 4}));
}

TEST(FifoRunIntervals, NeverEndAfterCompletionWasSeenAndNeverOverlap) {
  // Run times rounded up past the moment the waiter saw completion (58).
  const auto v = fifoRunIntervals({{40, 10}, {45, 10}}, 58);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0], (TimedRange{40, 10}));
  EXPECT_EQ(v[1], (TimedRange{50, 8}));
  for (size_t i = 1; i < v.size(); ++i) EXPECT_LE(v[i - 1].endUs(), v[i].startUs);
  EXPECT_TRUE(fifoRunIntervals({}, 0).empty());
  const auto late = fifoRunIntervals({{100, 5}}, 90);  // launched after the cut-off
  EXPECT_EQ(late[0], (TimedRange{100, 0}));
}

}  // namespace
}  // namespace strata::profiler
