// From timed runs to layer costs (pipeline/layer_timing.h), on synthetic samples: warm-up
// runs are dropped, medians resist bursts, W is capped at the backward, and the measured W
// reaches the simulator's stage costs instead of the default share.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "pipeline/layer_timing.h"
#include "pipeline/partitioner.h"
#include "pipeline/plan.h"
#include "pipeline/simulator.h"

namespace strata::pipeline {
namespace {

TEST(LayerTiming, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(medianSeconds({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(medianSeconds({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(medianSeconds({}), 0);
}

TEST(LayerTiming, WarmupRunsAreDroppedBeforeTheMedian) {
  LayerTimingSamples s;
  // Two slow warm-up runs (first touch), then five steady ones.
  s.forwardSeconds = {0.050, 0.020, 0.010, 0.011, 0.012, 0.010, 0.011};
  s.backwardSeconds = {0.100, 0.040, 0.020, 0.021, 0.022, 0.020, 0.021};
  const LayerTimes t = layerTimesFromSamples(s, 2, "fc1");
  EXPECT_EQ(t.samples, 5);
  EXPECT_DOUBLE_EQ(t.forwardSeconds, 0.011);
  EXPECT_DOUBLE_EQ(t.backwardSeconds, 0.021);
  EXPECT_DOUBLE_EQ(t.weightGradientSeconds, -1);  // not measured
  // Slow first runs that outnumber the steady ones move the median unless dropped.
  s.forwardSeconds = {0.050, 0.040, 0.030, 0.010, 0.011};
  s.backwardSeconds = {1, 1, 1, 1, 1};
  EXPECT_DOUBLE_EQ(layerTimesFromSamples(s, 0, "fc1").forwardSeconds, 0.030);
  EXPECT_DOUBLE_EQ(layerTimesFromSamples(s, 3, "fc1").forwardSeconds, 0.0105);
}

TEST(LayerTiming, MedianIgnoresABurstThatBestOfAndMeanDoNot) {
  LayerTimingSamples s;
  s.forwardSeconds = {0.010, 0.010, 0.090, 0.010, 0.004, 0.010, 0.010};  // a burst and a lucky run
  s.backwardSeconds = {0.020, 0.020, 0.020, 0.150, 0.020, 0.020, 0.020};
  const LayerTimes t = layerTimesFromSamples(s, 1, "fc1");
  EXPECT_DOUBLE_EQ(t.forwardSeconds, 0.010);
  EXPECT_DOUBLE_EQ(t.backwardSeconds, 0.020);
}

TEST(LayerTiming, WeightGradientIsAMedianCappedAtTheBackward) {
  LayerTimingSamples s;
  s.forwardSeconds = {1, 1, 1, 1};
  s.backwardSeconds = {9, 2, 2, 2};
  s.weightGradientSeconds = {9, 1.2, 1.3, 1.1};
  EXPECT_DOUBLE_EQ(layerTimesFromSamples(s, 1, "fc1").weightGradientSeconds, 1.2);
  s.weightGradientSeconds = {9, 2.5, 2.6, 2.4};  // split runs slower than the full backward
  EXPECT_DOUBLE_EQ(layerTimesFromSamples(s, 1, "fc1").weightGradientSeconds, 2);
}

TEST(LayerTiming, ErrorsNameTheLayer) {
  LayerTimingSamples s;
  s.forwardSeconds = {1, 1};
  s.backwardSeconds = {1, 1};
  try {
    layerTimesFromSamples(s, 2, "blocks.3");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"blocks.3\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("none left after 2 warm-up"), std::string::npos) << e.what();
  }
  s.backwardSeconds = {1};
  EXPECT_THROW(layerTimesFromSamples(s, 0, "fc1"), Error);
  s.backwardSeconds = {1, 1};
  s.weightGradientSeconds = {1};
  EXPECT_THROW(layerTimesFromSamples(s, 0, "fc1"), Error);
}

TEST(LayerTiming, MeasuredWeightGradientReachesTheStageCosts) {
  std::vector<LayerCost> layers = uniformLayers(4, 0.001, 0.002, 64);
  layers[0].weightGradientSeconds = 0.0016;  // measured: 80 %
  layers[1].weightGradientSeconds = 0;       // no parameters (an activation)
  // layers 2 and 3: not measured, the default share (50 %)
  EXPECT_DOUBLE_EQ(layers[0].weightGradientOrDefault(), 0.0016);
  EXPECT_DOUBLE_EQ(layers[2].weightGradientOrDefault(), 0.002 * kDefaultWeightGradientShare);
  PartitionOptions options;
  const Partition part = partition(layers, 2, options);
  ASSERT_TRUE(part.ok) << part.reason;
  ASSERT_EQ(part.stages[0].endLayer, 2);
  const CostModel costs = costModelFor(part, 2, 1, LinkModel{});
  EXPECT_DOUBLE_EQ(costs.stages[0].weightGradientSeconds, 0.0016 + 0);
  EXPECT_DOUBLE_EQ(costs.stages[1].weightGradientSeconds, 0.002);  // 2 x 50 % of 2 ms
}

// The zero_bubble plan prices B and W from the profile: a measured W of 80 % changes its
// predicted step (1F1B's, which never splits, stays), and the schedule table says which share
// it used.
TEST(LayerTiming, ZeroBubblePlanUsesTheMeasuredShare) {
  auto planWith = [](double weightShare, ScheduleKind kind) {
    std::vector<LayerCost> layers = uniformLayers(8, 0.001, 0.002, 0);
    if (weightShare >= 0)
      for (LayerCost& l : layers) l.weightGradientSeconds = 0.002 * weightShare;
    PlanRequest r;
    r.schedule.kind = kind;
    r.schedule.partitions = 4;
    r.schedule.microbatches = 8;
    r.schedule.activeMicrobatches = kind == ScheduleKind::kInterleaved ? 4 : 0;
    return planPipeline(layers, r);
  };
  const PipelinePlan assumed = planWith(-1, ScheduleKind::kZeroBubble);
  const PipelinePlan measured = planWith(0.8, ScheduleKind::kZeroBubble);
  ASSERT_TRUE(assumed.simulation.ok && measured.simulation.ok);
  EXPECT_NE(assumed.simulation.stepSeconds, measured.simulation.stepSeconds);
  EXPECT_DOUBLE_EQ(planWith(-1, ScheduleKind::kInterleaved).simulation.stepSeconds,
                   planWith(0.8, ScheduleKind::kInterleaved).simulation.stepSeconds);
  const std::string table = formatScheduleComparison(compareSchedules(measured));
  EXPECT_NE(table.find("(W = 80% of the backward)"), std::string::npos) << table;
  EXPECT_NE(formatScheduleComparison(compareSchedules(assumed)).find("(W = 50% of the backward)"), std::string::npos);
}

}  // namespace
}  // namespace strata::pipeline
