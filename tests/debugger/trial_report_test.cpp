// The text `strata trial` prints (debugger/trial_report.h).
#include <gtest/gtest.h>

#include "debugger/hook.h"
#include "debugger/trial_report.h"
#include "debugger_testing.h"

namespace strata::debugger {
namespace {

using testing::debuggerConfig;
using testing::TempDir;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(TrialReport, SummaryStepsAndTensor) {
  TempDir dir;
  {
    Hook hook(debuggerConfig(R"({"save_interval": 1, "collections": [{"name": "weights"},
        {"name": "gradients", "reductions": ["abs_mean"]}]})"),
              testing::hookOptions(dir.path()));
    for (int s = 0; s < 3; ++s) {
      hook.beginStep(s < 2 ? Mode::kTrain : Mode::kEval);
      std::vector<float> w(12);
      for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) + s;
      hook.saveTensor("Net_fc1.weight", DType::kFloat32, {3, 4}, w.data());
      hook.saveTensor("gradient/Net_fc1.weight", DType::kFloat32, {3, 4}, w.data());
    }
    hook.close(true);
  }
  Trial trial(dir.path());
  const std::string summary = trialSummary(trial, {});
  EXPECT_TRUE(contains(summary, "workers: worker_0 (num_workers 1)")) << summary;
  EXPECT_TRUE(contains(summary, "training ended: yes")) << summary;
  EXPECT_TRUE(contains(summary, "TRAIN: 2 (0..1)")) << summary;
  EXPECT_TRUE(contains(summary, "EVAL: 1 (0)")) << summary;
  EXPECT_TRUE(contains(summary, "gradient/Net_fc1.weight  steps 2 (0..1) (reductions only)")) << summary;
  EXPECT_TRUE(contains(summary, "Net_fc1.weight  steps 3 (0..2)\n")) << summary;

  const std::string steps = trialSteps(trial);
  EXPECT_TRUE(contains(steps, "2       EVAL     0          1        yes")) << steps;

  TrialReportOptions options;
  options.maxValues = 3;
  const std::string tensor = tensorReport(trial, "Net_fc1.weight", options);
  EXPECT_TRUE(contains(tensor, "step 1 (TRAIN 1) worker_0: float32 [3, 4] [1, 2, 3, ... (12 values)] "
                               "min 1 max 12 mean 6.5")) << tensor;
  EXPECT_TRUE(contains(tensor, "step 2 (EVAL 0) worker_0")) << tensor;
  const std::string grad = tensorReport(trial, "gradient/Net_fc1.weight", options);
  EXPECT_TRUE(contains(grad, "step 0 (TRAIN 0) worker_0:  abs_mean=5.5")) << grad;
  EXPECT_THROW(tensorReport(trial, "nope", options), TensorUnavailable);
}

}  // namespace
}  // namespace strata::debugger
