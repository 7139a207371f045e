// The save schedule (specs/smdebug.md §1.8, §8.11): interval, explicit steps, start/end,
// per-mode step counters, gradients skipped in EVAL/PREDICT, and no work when nothing is due.
#include <gtest/gtest.h>

#include "debugger/collections.h"
#include "debugger/file_util.h"
#include "debugger/hook.h"
#include "debugger_testing.h"

namespace strata::debugger {
namespace {

using testing::debuggerConfig;
using testing::dueSteps;
using testing::TempDir;

TEST(Schedule, IntervalIsNotRelativeToStart) {
  const auto cs = effectiveCollections(debuggerConfig(
      R"({"collections": [{"name": "weights", "save_interval": 4, "start_step": 3, "end_step": 13}]})"));
  EXPECT_EQ(dueSteps(cs[0], Mode::kTrain, 20), (std::vector<int64_t>{4, 8, 12}));
}

TEST(Schedule, ExplicitStepsAddToTheIntervalAndIgnoreTheRange) {
  const auto cs = effectiveCollections(debuggerConfig(
      R"({"collections": [{"name": "weights", "save_interval": 10, "save_steps": [1, 25, 3],
                            "end_step": 20}]})"));
  EXPECT_EQ(dueSteps(cs[0], Mode::kTrain, 30), (std::vector<int64_t>{0, 1, 3, 10, 25}));
}

TEST(Schedule, DefaultIntervalIs500AndSectionKeysAreInherited) {
  auto cs = effectiveCollections(debuggerConfig(R"({"collections": [{"name": "losses"}]})"));
  EXPECT_EQ(dueSteps(cs[0], Mode::kTrain, 1000), (std::vector<int64_t>{0, 500, 1000}));
  cs = effectiveCollections(debuggerConfig(
      R"({"save_interval": 3, "collections": [{"name": "losses"}, {"name": "weights", "save_interval": 5}]})"));
  EXPECT_EQ(dueSteps(cs[0], Mode::kTrain, 9), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(dueSteps(cs[1], Mode::kTrain, 9), (std::vector<int64_t>{0, 5}));
}

TEST(Schedule, GradientsAreSkippedInEvalAndPredict) {
  const auto cs = effectiveCollections(debuggerConfig(
      R"({"save_interval": 1, "collections": [{"name": "gradients"}, {"name": "weights"},
                                              {"name": "mygrads", "include_regex": "^gradient"}]})"));
  EXPECT_EQ(dueCollections(cs, Mode::kTrain, 0), 0b111u);
  EXPECT_EQ(dueCollections(cs, Mode::kGlobal, 0), 0b111u);
  // Only the built-in name is skipped, as in smdebug (a custom collection is not).
  EXPECT_EQ(dueCollections(cs, Mode::kEval, 0), 0b110u);
  EXPECT_EQ(dueCollections(cs, Mode::kPredict, 0), 0b110u);
}

TEST(Schedule, BuiltinRegexesSelectSmdebugNames) {
  const auto cs = effectiveCollections(debuggerConfig(
      R"({"collections": [{"name": "weights"}, {"name": "biases"}, {"name": "gradients"},
                          {"name": "losses"}, {"name": "outputs"}, {"name": "metrics"}]})"));
  CollectionMatcher m(cs);
  EXPECT_EQ(m.collectionsOf("Net_fc1.weight"), 0b000001u);
  EXPECT_EQ(m.collectionsOf("Net_fc1.bias"), 0b000010u);
  EXPECT_EQ(m.collectionsOf("gradient/Net_fc1.weight"), 0b000100u);
  EXPECT_EQ(m.collectionsOf("CrossEntropyLoss_output_0"), 0b011000u);
  EXPECT_EQ(m.collectionsOf("CrossEntropyLoss_input_0"), 0b000000u);
  EXPECT_EQ(m.collectionsOf("relu1_output_0"), 0b010000u);
  EXPECT_EQ(m.collectionsOf("scalar/accuracy"), 0b100000u);
  EXPECT_EQ(m.cachedNames(), 7u);
}

TEST(Schedule, PlanMergesDueCollections) {
  const auto cs = effectiveCollections(debuggerConfig(
      R"({"collections": [{"name": "a", "include_regex": "x", "reductions": ["mean", "abs_l2"]},
                          {"name": "b", "include_regex": "x", "reductions": ["mean", "max"],
                           "save_raw_tensor": true},
                          {"name": "losses"}]})"));
  TensorPlan p = planTensor(cs, 0b001, "x");
  EXPECT_FALSE(p.raw);
  EXPECT_EQ(p.reductions.size(), 2u);
  p = planTensor(cs, 0b011, "x");
  EXPECT_TRUE(p.raw);
  EXPECT_EQ(p.reductions.size(), 3u);  // mean once
  p = planTensor(cs, 0b100, "x");
  EXPECT_TRUE(p.raw);
  EXPECT_TRUE(p.tensorboardScalar);
  EXPECT_TRUE(p.reductions.empty());
}

TEST(Schedule, HookCountsStepsPerMode) {
  TempDir dir;
  Hook hook(debuggerConfig(
                R"({"collections": [{"name": "weights", "save_interval": 2}, {"name": "gradients", "save_interval": 2}]})"),
            testing::hookOptions(dir.path()));
  // smdebug: the global step advances on every step; mode steps count per mode from 0.
  struct Expect { Mode mode; int64_t global, modeStep; bool due; };
  const Expect plan[] = {{Mode::kTrain, 0, 0, true},  {Mode::kTrain, 1, 1, false},
                         {Mode::kEval, 2, 0, true},   {Mode::kEval, 3, 1, false},
                         {Mode::kTrain, 4, 2, true},  {Mode::kEval, 5, 2, true},
                         {Mode::kGlobal, 6, 6, true}, {Mode::kTrain, 7, 3, false}};
  for (const Expect& e : plan) {
    EXPECT_EQ(hook.beginStep(e.mode), e.due) << "global " << e.global;
    EXPECT_EQ(hook.globalStep(), e.global);
    EXPECT_EQ(hook.modeStep(), e.modeStep) << "global " << e.global;
    EXPECT_EQ(hook.isDue("gradients"), e.due && e.mode != Mode::kEval) << "global " << e.global;
    EXPECT_EQ(hook.wantsTensor("gradient/Net_fc1.weight"), e.due && e.mode != Mode::kEval);
    EXPECT_EQ(hook.wantsTensor("Net_fc1.weight"), e.due);
    hook.endStep();
    EXPECT_FALSE(hook.wantsTensor("Net_fc1.weight"));  // after endStep
  }
  StepCounters c = hook.counters();
  EXPECT_EQ(c.globalStep, 7);
  EXPECT_EQ(c.modeSteps[0], 3);  // TRAIN
  EXPECT_EQ(c.modeSteps[1], 2);  // EVAL
}

TEST(Schedule, NothingIsWrittenOnStepsThatAreNotDue) {
  TempDir dir;
  Hook hook(debuggerConfig(R"({"collections": [{"name": "weights", "save_interval": 5, "end_step": 5}]})"),
            testing::hookOptions(dir.path()));
  const float w[2] = {1, 2};
  const uint64_t atStart = hook.TEST_writerItems();  // the collections file
  for (int s = 0; s < 5; ++s) {
    hook.beginStep(Mode::kTrain);
    EXPECT_EQ(hook.saveTensor("Net_fc1.weight", DType::kFloat32, {2}, w), s == 0);
    EXPECT_FALSE(hook.saveTensor("Net_fc1.bias", DType::kFloat32, {2}, w));  // not selected
  }
  // Step 0: begin + tensor; step 1: publish step 0; steps 2..4: nothing at all.
  EXPECT_EQ(hook.TEST_writerItems() - atStart, 3u);
  for (int s = 0; s < 100; ++s) hook.beginStep(Mode::kTrain);
  EXPECT_EQ(hook.TEST_writerItems() - atStart, 3u);
  hook.flush();
  const auto events = listFilesRecursive(dir.path() + "/events");
  EXPECT_EQ(events, (std::vector<std::string>{"000000000000/000000000000_worker_0.tfevents"}));
  const auto index = listFilesRecursive(dir.path() + "/index");
  EXPECT_EQ(index.size(), 1u);
}

TEST(Schedule, RankZeroOnlyWithIncludeWorkersOne) {
  TempDir dir;
  const auto cfg = debuggerConfig(R"({"collections": [{"name": "weights"}]})");
  Hook rank1(cfg, testing::hookOptions(dir.path(), 1, 2));
  EXPECT_FALSE(rank1.writes());
  EXPECT_FALSE(rank1.beginStep(Mode::kTrain));
  Hook rank0(cfg, testing::hookOptions(dir.path(), 0, 2));
  EXPECT_TRUE(rank0.writes());
  EXPECT_EQ(rank0.numWorkers(), 1);  // smdebug overrides num_workers to 1 for "one"
  Hook off(debuggerConfig("{}"), testing::hookOptions(dir.path()));
  EXPECT_FALSE(off.writes());
}

}  // namespace
}  // namespace strata::debugger
