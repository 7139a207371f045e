// Two workers written by two Hooks (as two data-parallel ranks, or two pipeline stages), read
// back with the Trial API: names, workers, complete steps, the end marker, waiting.
#include <gtest/gtest.h>

#include <thread>

#include "debugger/hook.h"
#include "debugger/naming.h"
#include "debugger/trial.h"
#include "debugger_testing.h"

namespace strata::debugger {
namespace {

using testing::debuggerConfig;
using testing::TempDir;

constexpr char kDataParallelConfig[] = R"({"include_workers": "all", "collections": [
    {"name": "weights", "save_interval": 2},
    {"name": "gradients", "save_interval": 2, "reductions": ["abs_mean"], "save_raw_tensor": true},
    {"name": "losses", "save_interval": 1}]})";

// One data-parallel rank: the same model on every rank; values depend on rank and step.
void runDataParallelRank(const std::string& dir, int rank, int trainSteps, int evalSteps) {
  Hook hook(debuggerConfig(kDataParallelConfig), testing::hookOptions(dir, rank, 2));
  for (int s = 0; s < trainSteps + evalSteps; ++s) {
    const Mode mode = s < trainSteps ? Mode::kTrain : Mode::kEval;
    if (hook.beginStep(mode)) {
      const float w[4] = {1.0f * s, 2.0f, 3.0f, 4.0f};
      hook.saveTensor(parameterTensorName("Net", "fc1.weight"), DType::kFloat32, {2, 2}, w);
      const float g[4] = {0.1f * rank, -0.2f, 0.3f, -0.4f};  // after all-reduce these would agree
      hook.saveTensor(gradientTensorName("Net", "fc1.weight"), DType::kFloat32, {2, 2}, g);
      const float loss = 1.0f / (s + 1) + rank;
      hook.saveTensor(lossTensorName("CrossEntropyLoss"), DType::kFloat32, {}, &loss);
    }
    hook.endStep();
  }
  hook.close(false);
  ASSERT_EQ(hook.firstError(), "");
}

TEST(EndToEnd, TwoDataParallelWorkers) {
  TempDir dir;
  std::thread r1([&] { runDataParallelRank(dir.path(), 1, 6, 2); });
  runDataParallelRank(dir.path(), 0, 6, 2);
  r1.join();
  writeEndMarker(dir.path());  // by rank 0, after every rank closed

  Trial trial(dir.path());
  EXPECT_TRUE(trial.problems().empty());
  EXPECT_EQ(trial.numWorkers(), 2);
  EXPECT_EQ(trial.workers(), (std::vector<std::string>{"worker_0", "worker_1"}));
  EXPECT_TRUE(trial.hasTrainingEnded());
  EXPECT_EQ(trial.tensorNames(), (std::vector<std::string>{"CrossEntropyLoss_output_0",
                                                           "Net_fc1.weight",
                                                           "gradient/Net_fc1.weight"}));
  EXPECT_EQ(trial.tensorNames("weights"), (std::vector<std::string>{"Net_fc1.weight"}));
  EXPECT_EQ(trial.tensorNames("gradients"), (std::vector<std::string>{"gradient/Net_fc1.weight"}));
  EXPECT_EQ(trial.tensorNames("losses"), (std::vector<std::string>{"CrossEntropyLoss_output_0"}));
  EXPECT_EQ(trial.steps(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(trial.steps(Mode::kTrain), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(trial.steps(Mode::kEval), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(trial.globalStep(Mode::kEval, 1), 7);

  const TrialTensor& grad = trial.tensor("gradient/Net_fc1.weight");
  EXPECT_EQ(grad.steps(), (std::vector<int64_t>{0, 2, 4}));  // none in EVAL
  EXPECT_EQ(grad.workers(2), (std::vector<std::string>{"worker_0", "worker_1"}));
  EXPECT_FLOAT_EQ(static_cast<float>(grad.value(2, "worker_1").toDoubles()[0]), 0.1f);
  EXPECT_FLOAT_EQ(static_cast<float>(grad.value(2).toDoubles()[0]), 0.0f);  // first worker
  EXPECT_NEAR(grad.reductionValue(2, ReductionOp::kMean, true, Mode::kGlobal, "worker_1"), 0.25, 1e-7);
  EXPECT_EQ(trial.tensor("Net_fc1.weight").steps(Mode::kEval), (std::vector<int64_t>{0}));
  const auto losses = trial.tensor("CrossEntropyLoss_output_0").values(Mode::kTrain);
  ASSERT_EQ(losses.size(), 6u);
  EXPECT_FLOAT_EQ(static_cast<float>(losses.at(3).scalar()), 0.25f);
}

TEST(EndToEnd, PipelineStageWithNothingDueStillCompletesTheStep) {
  TempDir dir;
  const auto cfg = debuggerConfig(
      R"({"include_workers": "all", "collections": [{"name": "losses", "save_interval": 1}]})");
  Hook stage0(cfg, testing::hookOptions(dir.path(), 0, 2));  // owns fc1: no loss
  Hook stage1(cfg, testing::hookOptions(dir.path(), 1, 2));  // owns fc2 and the loss
  for (int s = 0; s < 3; ++s) {
    EXPECT_TRUE(stage0.beginStep(Mode::kTrain));
    EXPECT_FALSE(stage0.wantsTensor(moduleOutputTensorName("fc1", 0)));
    stage0.endStep();
    stage1.beginStep(Mode::kTrain);
    const float loss = 0.5f;
    EXPECT_TRUE(stage1.saveTensor(lossTensorName("Loss"), DType::kFloat32, {1}, &loss));
    stage1.endStep();
  }
  stage0.flush();
  stage1.flush();
  Trial trial(dir.path());  // no end marker yet: completeness comes from both workers
  EXPECT_FALSE(trial.hasTrainingEnded());
  EXPECT_EQ(trial.steps(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(trial.tensor(lossTensorName("Loss")).workers(1), (std::vector<std::string>{"worker_1"}));
  EXPECT_EQ(trial.tensor(kStepMarkerTensor).workers(1), (std::vector<std::string>{"worker_0"}));
  EXPECT_EQ(trial.tensorNames("losses"), (std::vector<std::string>{"Loss_output_0"}));
}

TEST(EndToEnd, IncompleteStepsWaitForTheEndMarker) {
  TempDir dir;
  const auto cfg = debuggerConfig(
      R"({"include_workers": "all", "collections": [{"name": "weights", "save_interval": 1}]})");
  const float w = 1.0f;
  Hook r0(cfg, testing::hookOptions(dir.path(), 0, 2));
  Hook r1(cfg, testing::hookOptions(dir.path(), 1, 2));
  for (int s = 0; s < 3; ++s) {
    r0.beginStep(Mode::kTrain);
    r0.saveTensor("Net_w.weight", DType::kFloat32, {}, &w);
    if (s < 2) {  // worker_1 stops before step 2
      r1.beginStep(Mode::kTrain);
      r1.saveTensor("Net_w.weight", DType::kFloat32, {}, &w);
    }
  }
  r0.close(false);
  r1.close(false);
  Trial trial(dir.path(), {std::chrono::milliseconds(0), std::chrono::milliseconds(10)});
  EXPECT_EQ(trial.steps(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(trial.steps(Mode::kGlobal, true), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(trial.waitForSteps({2}, Mode::kTrain, std::chrono::milliseconds(50)),
            Trial::WaitResult::kTimeout);
  writeEndMarker(dir.path());
  EXPECT_EQ(trial.waitForSteps({2}, Mode::kTrain, std::chrono::milliseconds(50)),
            Trial::WaitResult::kAvailable);
  EXPECT_EQ(trial.steps(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(trial.waitForSteps({9}, Mode::kTrain, std::chrono::seconds(5)),
            Trial::WaitResult::kEnded);
}

TEST(EndToEnd, ReaderSeesStepsWhileTrainingRuns) {
  TempDir dir;
  const auto cfg = debuggerConfig(R"({"collections": [{"name": "weights", "save_interval": 1}]})");
  Hook hook(cfg, testing::hookOptions(dir.path()));
  const float w = 2.0f;
  hook.beginStep(Mode::kTrain);
  hook.saveTensor("Net_w.weight", DType::kFloat32, {}, &w);
  hook.flush();
  Trial trial(dir.path(), {std::chrono::milliseconds(0), std::chrono::milliseconds(10)});
  EXPECT_EQ(trial.steps(), (std::vector<int64_t>{0}));
  std::thread training([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (int s = 1; s < 4; ++s) {
      hook.beginStep(Mode::kTrain);
      hook.saveTensor("Net_w.weight", DType::kFloat32, {}, &w);
    }
    hook.close(true);
  });
  EXPECT_EQ(trial.waitForSteps({3}, Mode::kTrain, std::chrono::seconds(20)),
            Trial::WaitResult::kAvailable);
  training.join();
  trial.refresh();
  EXPECT_EQ(trial.steps(), (std::vector<int64_t>{0, 1, 2, 3}));
}

}  // namespace
}  // namespace strata::debugger
