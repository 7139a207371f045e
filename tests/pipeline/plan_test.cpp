// The whole planning step (what `strata simulate` prints and the executor logs).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/errors.h"
#include "pipeline/plan.h"

namespace strata::pipeline {
namespace {

std::string examplePath() {
  return std::string(STRATA_SOURCE_DIR) + "/examples/pipeline/layers_example.json";
}

PlanRequest request(ScheduleKind kind, int p, int m, int v = 1) {
  PlanRequest r;
  r.schedule.kind = kind;
  r.schedule.partitions = p;
  r.schedule.microbatches = m;
  r.schedule.virtualStages = v;
  return r;
}

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

TEST(Plan, ExampleProfileOnFourStages) {
  const PipelinePlan plan = planPipeline(readLayerProfile(examplePath()), request(ScheduleKind::kInterleaved, 4, 8));
  ASSERT_TRUE(plan.partition.ok) << plan.partition.reason;
  ASSERT_TRUE(plan.simulation.ok);
  ASSERT_EQ(plan.programs.size(), 4u);
  // 8 blocks of 36 ms, embed 3 ms, norm and head 24.6 ms: two blocks per stage with the
  // head on the last is optimal (any stage with three blocks costs 108 ms).
  EXPECT_NEAR(plan.partition.bottleneckSeconds, 0.0966, 1e-12);
  EXPECT_EQ(plan.partition.stages[3].endLayer, 11);
  const std::string text = formatPlan(plan);
  EXPECT_TRUE(has(text, "pipeline plan: 11 layers, partitions=4 virtual_stages=1 microbatches=8 pipeline=interleaved "
                        "active_microbatches=6 optimize=speed dp=1"))
      << text;
  EXPECT_TRUE(has(text, "3     3    7-10 (block6..lm_head)")) << text;
  EXPECT_TRUE(has(text, "bottleneck stage time: 96.600 ms")) << text;
  EXPECT_TRUE(has(text, "predicted step time: ")) << text;
  // The predicted step is at least the busiest rank's compute and at most fill + drain of
  // the bottleneck stage with every message on the critical path.
  double busiest = 0;
  for (const RankStats& r : plan.simulation.ranks) busiest = std::max(busiest, r.busySeconds);
  EXPECT_GE(plan.simulation.stepSeconds, busiest);
  EXPECT_LE(plan.simulation.stepSeconds, (8 + 4 - 1) * (0.0966 + 2 * 0.004));
}

TEST(Plan, UniformLayersGiveTheTextbookBubble) {
  const auto layers = uniformLayers(8, 0.001, 0.002, 0);
  for (ScheduleKind kind : {ScheduleKind::kSimple, ScheduleKind::kInterleaved}) {
    PlanRequest r = request(kind, 4, 8);
    r.schedule.activeMicrobatches = 4;
    const PipelinePlan plan = planPipeline(layers, r);
    ASSERT_TRUE(plan.simulation.ok);
    EXPECT_NEAR(plan.simulation.bubbleFraction, 3.0 / 11.0, 1e-12);
    EXPECT_TRUE(has(formatPlan(plan), "bubble 27.3% of rank time (37.5% over ideal)")) << formatPlan(plan);
  }
}

TEST(Plan, MemoryModeUsesTheSchedulesInFlightCounts) {
  const auto layers = uniformLayers(8, 0.001, 0.002, 1 << 20);
  PlanRequest simple = request(ScheduleKind::kSimple, 2, 4);
  simple.objective = Objective::kMemory;
  const PipelinePlan a = planPipeline(layers, simple);
  ASSERT_TRUE(a.partition.ok);
  EXPECT_EQ(a.partition.stages[0].inFlight, 4);
  EXPECT_EQ(a.partition.stages[1].inFlight, 4);
  PlanRequest oneFOneB = request(ScheduleKind::kInterleaved, 2, 4);
  oneFOneB.objective = Objective::kMemory;
  oneFOneB.schedule.activeMicrobatches = 2;
  const PipelinePlan b = planPipeline(layers, oneFOneB);
  ASSERT_TRUE(b.partition.ok);
  EXPECT_EQ(b.partition.stages[0].inFlight, 2);
  EXPECT_EQ(b.partition.stages[1].inFlight, 1);
  EXPECT_LT(b.partition.stages[0].numLayers(), b.partition.stages[1].numLayers());
  // Predicted stash equals the simulator's measured peak on every rank.
  for (size_t r = 0; r < 2; ++r)
    EXPECT_EQ(b.simulation.ranks[r].peakMemoryBytes, b.partition.stages[r].memoryBytes) << "rank " << r;
}

TEST(Plan, HybridAddsTheReduceCost) {
  const auto layers = uniformLayers(4, 0.001, 0.002, 0, 1 << 20);
  PlanRequest r = request(ScheduleKind::kInterleaved, 2, 4);
  r.link.bytesPerSecond = 1e9;
  const PipelinePlan alone = planPipeline(layers, r);
  r.schedule.dataParallelSize = 4;
  const PipelinePlan hybrid = planPipeline(layers, r);
  ASSERT_TRUE(alone.simulation.ok && hybrid.simulation.ok);
  // Each rank reduces 2 MiB of gradients: 2 * 3/4 * 2 MiB / 1 GB/s.
  const double reduce = 2 * 0.75 * (2 << 20) / 1e9;
  EXPECT_NEAR(hybrid.simulation.ranks[0].busySeconds - alone.simulation.ranks[0].busySeconds, reduce, 1e-12);
  EXPECT_TRUE(has(formatPlan(hybrid), "dp=4"));
}

TEST(Plan, CannotIsReportedNotThrown) {
  PlanRequest r = request(ScheduleKind::kSimple, 2, 4);
  r.memoryCapBytes = 1000;
  const PipelinePlan plan = planPipeline(uniformLayers(4, 0.001, 0.001, 1000), r);
  EXPECT_FALSE(plan.partition.ok);
  EXPECT_TRUE(plan.programs.empty());
  const std::string text = formatPlan(plan);
  EXPECT_TRUE(has(text, "no plan: cannot: no partition into 2 stages keeps every stage within the memory cap of 1000 B; "
                        "the smallest achievable peak stage memory is 7.81 KiB (8000 bytes)"))
      << text;
}

TEST(Plan, ManualPartitionAndBadRequests) {
  PlanRequest r = request(ScheduleKind::kInterleaved, 2, 2);
  r.manualStageOfLayer = {0, 1, 1, 1};
  const PipelinePlan plan = planPipeline(uniformLayers(4, 0.001, 0.001, 0), r);
  ASSERT_TRUE(plan.partition.ok);
  EXPECT_EQ(plan.partition.stages[0].numLayers(), 1);
  EXPECT_TRUE(has(formatPlan(plan), "manual partition"));
  EXPECT_THROW(planPipeline(uniformLayers(1, 1, 1, 0), request(ScheduleKind::kSimple, 2, 2)), ConfigError);
  EXPECT_THROW(planPipeline(uniformLayers(4, 1, 1, 0), request(ScheduleKind::kSimple, 2, 0)), ConfigError);
  PlanRequest badLink = request(ScheduleKind::kSimple, 2, 2);
  badLink.link.bytesPerSecond = -1;
  EXPECT_THROW(planPipeline(uniformLayers(4, 1, 1, 0), badLink), ConfigError);
}

TEST(Plan, VirtualStagesPlanPTimesVStages) {
  const PipelinePlan plan = planPipeline(uniformLayers(8, 0.001, 0.002, 0), request(ScheduleKind::kInterleaved, 2, 4, 2));
  ASSERT_TRUE(plan.partition.ok);
  ASSERT_EQ(plan.partition.stages.size(), 4u);
  ASSERT_TRUE(plan.simulation.ok);
  EXPECT_NEAR(plan.simulation.bubbleOverIdeal, 1.0 / 8.0, 1e-12);  // (p-1)/(v m)
}

TEST(Plan, ChromeTraceHasOneEventPerInstruction) {
  const PipelinePlan plan = planPipeline(uniformLayers(4, 0.001, 0.002, 0), request(ScheduleKind::kInterleaved, 2, 4));
  ASSERT_TRUE(plan.simulation.ok);
  const nlohmann::json trace = chromeTrace(plan);
  size_t instructions = 0;
  for (const Program& prog : plan.programs) instructions += prog.instructions.size();
  const auto& events = trace.at("traceEvents");
  ASSERT_EQ(events.size(), instructions + 2);  // + one thread name per rank
  double last = 0;
  for (const auto& e : events) {
    if (e.at("ph") != "X") continue;
    last = std::max(last, e.at("ts").get<double>() + e.at("dur").get<double>());
    EXPECT_GE(e.at("dur").get<double>(), 0);
  }
  EXPECT_NEAR(last, plan.simulation.stepSeconds * 1e6, 1e-6);
  EXPECT_EQ(events.at(2).at("name"), "0LOAD0");
}

TEST(Plan, FormatBytes) {
  EXPECT_EQ(formatBytes(17), "17 B");
  EXPECT_EQ(formatBytes(12 * 1024), "12.0 KiB");
  EXPECT_EQ(formatBytes(size_t{3} << 29), "1.50 GiB");
}

}  // namespace
}  // namespace strata::pipeline
