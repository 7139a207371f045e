// The per-rank time breakdown, overlap, straggler and slow-stage detection on synthetic
// timelines built slice by slice (profiler/breakdown.h): interval algebra, each time class,
// and table-driven runs (data parallel with a straggler, a pipeline with an unbalanced stage,
// a hybrid run, perfectly balanced runs).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "profiler/breakdown.h"
#include "profiler/intervals.h"

namespace strata::profiler {
namespace {

TEST(Intervals, UnionIntersectionDifference) {
  const IntervalSet a = unite({{0, 10}, {5, 15}, {20, 30}, {30, 31}, {40, 40}});
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].startUs, 0);
  EXPECT_EQ(a[0].endUs, 15);
  EXPECT_EQ(a[1].endUs, 31);
  const IntervalSet b = unite({{10, 22}, {25, 26}});
  EXPECT_EQ(lengthUs(intersect(a, b)), 5 + 2 + 1);
  EXPECT_EQ(lengthUs(subtract(a, b)), lengthUs(a) - 8);
  const IntervalSet d = subtract(a, b);
  ASSERT_EQ(d.size(), 3u);  // [0,10) [22,25) [26,31), and nothing of [10,15)
  EXPECT_EQ(d[0].startUs, 0);
  EXPECT_EQ(d[0].endUs, 10);
  EXPECT_EQ(d[1].startUs, 22);
  EXPECT_EQ(d[1].endUs, 25);
  EXPECT_EQ(d[2].startUs, 26);
  EXPECT_EQ(d[2].endUs, 31);
  EXPECT_EQ(lengthUs(clip(a, 12, 21)), 3 + 1);
  EXPECT_TRUE(subtract(b, unite({{0, 100}})).empty());
}

// One rank's timeline, built step by step: each step is `dataMs` of loading, `computeMs` of
// forward+backward (backward's last `overlapMs` under the bucket AllReduce), `waitMs` of
// AllReduceWait or pipeline receive, and the rest of `stepMs` idle.
struct RankPlan {
  int rank;
  std::vector<int> stages;  // empty: data parallel
  double dataMs, computeMs, overlapMs, commAfterMs, pipeWaitMs, idleMs;
  double slowFactor = 1;  // compute multiplied on this rank
};

constexpr int64_t kT0 = 1700000000000000;
constexpr int64_t kMs = 1000;

TraceEvent slice(int rank, const std::string& phase, const std::string& name, int64_t start, int64_t dur, int64_t step,
                 const std::vector<int>& stages = {}) {
  TraceEvent e;
  e.rank = rank;
  e.phase = phase;
  e.name = name;
  e.startUs = start;
  e.endUs = start + dur;
  e.durUs = dur;
  e.args = nlohmann::json::object();
  e.args["step_num"] = std::to_string(step);
  if (!stages.empty()) e.args["stage"] = stages.front();
  return e;
}

void addRank(std::vector<TraceEvent>& out, const RankPlan& p, int steps) {
  int64_t t = kT0;
  for (int s = 0; s < steps; ++s) {
    const int64_t data = static_cast<int64_t>(p.dataMs * kMs);
    // A little per-step jitter so that ties do not decide the slowest rank.
    const double jitter = 1 + 0.01 * ((s * 7 + p.rank * 3) % 5);
    const int64_t compute = static_cast<int64_t>(p.computeMs * p.slowFactor * jitter * kMs);
    const int64_t overlap = static_cast<int64_t>(p.overlapMs * kMs), after = static_cast<int64_t>(p.commAfterMs * kMs);
    const int64_t pipe = static_cast<int64_t>(p.pipeWaitMs * kMs), idle = static_cast<int64_t>(p.idleMs * kMs);
    if (data > 0) out.push_back(slice(p.rank, "DataLoaderIter", "DataLoaderIter", t, data, s));
    const int64_t stepStart = t + data;
    const int64_t fwd = compute / 3;
    out.push_back(slice(p.rank, "Forward", "Net", stepStart, fwd, s, p.stages));
    out.push_back(slice(p.rank, "Forward-SubModuleInternal", "fc1", stepStart, fwd / 2, s, p.stages));  // nested
    out.push_back(slice(p.rank, "Backward(post-forward)", "Net", stepStart + fwd, compute - fwd, s, p.stages));
    int64_t end = stepStart + compute;
    if (overlap + after > 0) {
      out.push_back(slice(p.rank, "AllReduce", "bucket 0", end - overlap, overlap + after, s));
      if (after > 0) out.push_back(slice(p.rank, "AllReduceWait", "AllReduceWait", end, after, s));
      end += after;
    }
    if (pipe > 0) {
      out.push_back(slice(p.rank, "Pipeline", "recv activation", end, pipe, s, p.stages));
      out.push_back(slice(p.rank, "Pipeline", "send activation", end + pipe, 10, s, p.stages));
      end += pipe + 10;
    }
    out.push_back(slice(p.rank, "Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", stepStart, end - stepStart, s));
    t = end + idle;
  }
}

TEST(Breakdown, EachTimeClassOfOneRank) {
  std::vector<TraceEvent> events;
  addRank(events, {0, {}, 2, 30, 5, 4, 0, 1}, 10);
  const Breakdown b = analyzeBreakdown(events);
  ASSERT_EQ(b.ranks.size(), 1u);
  const RankTime& r = b.ranks[0];
  EXPECT_EQ(b.layout, "single rank");
  EXPECT_EQ(r.steps, 10);
  EXPECT_EQ(r.dataLoadingUs, 10 * 2 * kMs);
  EXPECT_EQ(r.exposedCommUs, 10 * 4 * kMs);  // the AllReduce after compute (and its wait)
  EXPECT_EQ(r.commUs, 10 * 9 * kMs);
  EXPECT_EQ(r.overlappedCommUs, 10 * 5 * kMs);
  ASSERT_TRUE(r.overlapPercent().has_value());
  EXPECT_NEAR(*r.overlapPercent(), 100.0 * 5 / 9, 1e-9);
  EXPECT_EQ(r.pipelineWaitUs, 0);
  // Every instant counted once: the classes add up to the period.
  EXPECT_EQ(r.computeUs + r.exposedCommUs + r.pipelineWaitUs + r.dataLoadingUs + r.idleUs, r.periodUs);
  EXPECT_EQ(r.idleUs, 9 * 1 * kMs);  // between steps (none after the last)
  EXPECT_EQ(r.computeByStep.size(), 10u);
  EXPECT_TRUE(b.stragglers.empty());
  EXPECT_FALSE(b.slowStage.has_value());
}

TEST(Breakdown, SliceClassesFollowTheProfilersPhases) {
  const struct {
    const char* phase;
    const char* name;
    SliceClass want;
  } cases[] = {
      {"Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", SliceClass::kStep},
      {"Forward", "Net", SliceClass::kCompute},
      {"Forward-SubModuleInternal", "fc1", SliceClass::kCompute},
      {"Backward-SubModuleInternal", "fc1", SliceClass::kCompute},
      {"Optimizer", "step", SliceClass::kCompute},
      {"AllReduce", "bucket 3", SliceClass::kComm},
      {"AllReduceWait", "AllReduceWait", SliceClass::kCommWait},
      {"Pipeline", "recv gradient", SliceClass::kPipelineWait},
      {"Pipeline", "wait sends", SliceClass::kPipelineWait},
      {"Pipeline", "send activation", SliceClass::kComm},
      {"DataLoaderIter", "DataLoaderIter", SliceClass::kDataLoading},
      {"nccl:all_reduce", "x", SliceClass::kComm},
      {"Checkpoint", "save", SliceClass::kOther},
      {"UserRange", "augment", SliceClass::kOther},
  };
  for (const auto& c : cases) EXPECT_EQ(classifySlice(c.phase, c.name), c.want) << c.phase << " / " << c.name;
}

struct RunCase {
  const char* name;
  std::vector<RankPlan> ranks;
  const char* layout;
  std::vector<int> stragglers;
  std::vector<int> slowStage;  // its stages; empty: none
};

TEST(Breakdown, StragglersAndSlowStagesTable) {
  const RunCase cases[] = {
      {"dp balanced", {{0, {}, 1, 20, 4, 2, 0, 1}, {1, {}, 1, 20, 4, 2, 0, 1}, {2, {}, 1, 20, 4, 2, 0, 1}}, "data parallel",
       {}, {}},
      {"dp straggler",
       {{0, {}, 1, 20, 4, 8, 0, 1}, {1, {}, 1, 20, 4, 2, 0, 1, 1.6}, {2, {}, 1, 20, 4, 8, 0, 1}},
       "data parallel",
       {1},
       {}},
      {"pipeline balanced", {{0, {0}, 1, 20, 0, 0, 3, 1}, {1, {1}, 0, 20, 0, 0, 3, 1}}, "pipeline", {}, {}},
      {"pipeline unbalanced", {{0, {0}, 1, 40, 0, 0, 1, 1}, {1, {1}, 0, 8, 0, 0, 30, 1}}, "pipeline", {}, {0}},
      {"hybrid straggler replica",
       {{0, {0}, 1, 20, 2, 1, 3, 1}, {1, {1}, 0, 20, 2, 1, 3, 1}, {2, {0}, 1, 20, 2, 1, 3, 1, 1.5},
        {3, {1}, 0, 20, 2, 1, 3, 1}},
       "hybrid",
       {2},
       {}},
  };
  for (const RunCase& c : cases) {
    std::vector<TraceEvent> events;
    for (const RankPlan& p : c.ranks) addRank(events, p, 30);
    const Breakdown b = analyzeBreakdown(events);
    EXPECT_EQ(b.layout, c.layout) << c.name;
    std::vector<int> stragglers;
    for (const Straggler& s : b.stragglers) stragglers.push_back(s.rank);
    EXPECT_EQ(stragglers, c.stragglers) << c.name;
    EXPECT_EQ(b.slowStage.has_value(), !c.slowStage.empty()) << c.name;
    if (b.slowStage && !c.slowStage.empty()) {
      EXPECT_EQ(b.slowStage->stages, c.slowStage) << c.name;
      EXPECT_NE(b.slowStage->evidence.find("the pipeline waits for it"), std::string::npos);
    }
    for (const RankTime& r : b.ranks)
      EXPECT_EQ(r.computeUs + r.exposedCommUs + r.pipelineWaitUs + r.dataLoadingUs + r.idleUs, r.periodUs)
          << c.name << " rank " << r.rank;
  }
}

TEST(Breakdown, StragglerEvidenceNamesTheNumbers) {
  std::vector<TraceEvent> events;
  addRank(events, {0, {}, 1, 20, 4, 2, 0, 1}, 20);
  addRank(events, {1, {}, 1, 20, 4, 2, 0, 1, 2.0}, 20);
  const Breakdown b = analyzeBreakdown(events);
  ASSERT_EQ(b.stragglers.size(), 1u);
  const Straggler& s = b.stragglers[0];
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.slowestSteps, 20);
  EXPECT_EQ(s.comparedSteps, 20);
  EXPECT_NEAR(s.ratio, 2.0, 0.05);
  EXPECT_NE(s.evidence.find("rank 1 was the slowest in 20 of 20 steps"), std::string::npos) << s.evidence;
  // The waiting shows on the fast rank: it waits for the slow one in the AllReduce.
  const nlohmann::json j = toJson(b);
  EXPECT_EQ(j["stragglers"][0]["rank"], 1);
  EXPECT_EQ(j["ranks"].size(), 2u);
  EXPECT_TRUE(j["ranks"][0].contains("overlap_percent"));
}

TEST(Breakdown, TooFewStepsOrNoRanks) {
  std::vector<TraceEvent> events;
  addRank(events, {0, {}, 1, 20, 4, 2, 0, 1}, 3);
  addRank(events, {1, {}, 1, 20, 4, 2, 0, 1, 3.0}, 3);
  EXPECT_TRUE(analyzeBreakdown(events).stragglers.empty());  // 3 steps < minSteps
  EXPECT_TRUE(analyzeBreakdown({}).ranks.empty());
  EXPECT_EQ(analyzeBreakdown({}).layout, "");
}

// A training phase (TRAIN steps 0-9, 30 ms of compute, the optimizer after each Step slice)
// then an evaluation pass (EVAL steps 0-9, 6 ms of forward): the same step numbers, kept
// apart. Merged, TRAIN step k would count 36 ms and the EVAL steps would vanish.
TEST(Breakdown, TrainAndEvalStepsWithTheSameNumberAreKeptApart) {
  std::vector<TraceEvent> events;
  int64_t t = kT0;
  for (int s = 0; s < 10; ++s) {
    events.push_back(slice(0, "Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", t, 28 * kMs, s));
    events.push_back(slice(0, "Forward", "Net", t, 10 * kMs, s));
    events.push_back(slice(0, "Backward(post-forward)", "Net", t + 10 * kMs, 18 * kMs, s));
    events.push_back(slice(0, "Optimizer", "step", t + 28 * kMs, 2 * kMs, s));  // after the Step slice
    t += 31 * kMs;
  }
  for (int s = 0; s < 10; ++s) {
    events.push_back(slice(0, "Step:ModeKeys.EVAL", "Step:ModeKeys.EVAL", t, 6 * kMs, s));
    events.push_back(slice(0, "Forward", "Net", t, 6 * kMs, s));
    t += 7 * kMs;
  }
  const Breakdown b = analyzeBreakdown(events);
  ASSERT_EQ(b.ranks.size(), 1u);
  const RankTime& r = b.ranks[0];
  ASSERT_EQ(r.computeByStep.size(), 20u);
  for (int s = 0; s < 10; ++s) {
    EXPECT_EQ(r.computeByStep.at(StepKey{"TRAIN", s}), 30 * kMs) << s;
    EXPECT_EQ(r.computeByStep.at(StepKey{"EVAL", s}), 6 * kMs) << s;
  }
  EXPECT_EQ(r.medianComputeUs(), 30.0 * kMs);  // the training steps'
  const nlohmann::json j = toJson(b);
  EXPECT_EQ(j["ranks"][0]["compute_ms_by_step"]["TRAIN"]["3"], 30.0);
  EXPECT_EQ(j["ranks"][0]["compute_ms_by_step"]["EVAL"]["3"], 6.0);
}

TEST(Breakdown, ModeOfASliceFromTheStepSlices) {
  const std::vector<StepSlice> steps = {{"TRAIN", 4, 100, 200}, {"EVAL", 4, 500, 550}, {"TRAIN", 5, 210, 300}};
  EXPECT_EQ(modeOfSlice(steps, 4, 150), "TRAIN");  // inside
  EXPECT_EQ(modeOfSlice(steps, 4, 520), "EVAL");   // inside
  EXPECT_EQ(modeOfSlice(steps, 4, 205), "TRAIN");  // after its step slice (the optimizer)
  EXPECT_EQ(modeOfSlice(steps, 4, 600), "EVAL");   // the latest that began before it
  EXPECT_EQ(modeOfSlice(steps, 4, 50), "TRAIN");   // before any: the first
  EXPECT_EQ(modeOfSlice(steps, 9, 150), "");       // no Step slice with that number
}

}  // namespace
}  // namespace strata::profiler
