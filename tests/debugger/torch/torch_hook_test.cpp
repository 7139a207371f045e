// The libtorch adapter (src/adapter/observe/debugger_hook.cpp): tensors of a real module saved under
// smdebug's names, frozen parameters skipped, dtype conversion, strided and bf16 tensors,
// and the user calls of include/strata/debugger.h. Links the `strata` library (libtorch);
// kept out of debugger_test, which is torch-free.
#include <gtest/gtest.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/activation.h>
#include <torch/types.h>

#include "../debugger_testing.h"
#include "debugger/torch_hook.h"
#include "debugger/trial.h"
#include "strata/debugger.h"

namespace strata::debugger {
namespace {

using testing::debuggerConfig;
using testing::TempDir;

TEST(TorchHook, SavesParametersGradientsOutputsAndLoss) {
  TempDir dir;
  torch::manual_seed(0);
  torch::nn::Sequential net(torch::nn::Linear(4, 3), torch::nn::ReLU(), torch::nn::Linear(3, 2));
  net->named_parameters()["2.bias"].set_requires_grad(false);  // frozen: no gradient saved
  {
    TorchHook hook(debuggerConfig(R"({"save_interval": 2, "collections": [
        {"name": "weights"}, {"name": "biases"}, {"name": "gradients"}, {"name": "losses"},
        {"name": "relu", "include_regex": "1_output"}, {"name": "metrics"}]})"),
                   testing::hookOptions(dir.path()));
    setActiveHook(&hook);
    EXPECT_TRUE(enabled());
    for (int step = 0; step < 3; ++step) {
      const bool due = hook.beginStep(Mode::kTrain);
      EXPECT_EQ(due, step % 2 == 0);
      hook.saveParameters(*net);
      const auto x = torch::randn({5, 4});
      auto h = net[0]->as<torch::nn::Linear>()->forward(x);
      h = torch::relu(h);
      hook.saveModuleOutputs("1", {h});
      const auto out = net[2]->as<torch::nn::Linear>()->forward(h);
      const auto loss = out.pow(2).mean();
      loss.backward();
      hook.saveGradients(*net);
      hook.saveLoss(loss, "MSELoss");
      hook.endStep();
      save_scalar("step_times_two", 2.0 * step);
      net->zero_grad();
    }
    setActiveHook(nullptr);
    hook.close(true);
    EXPECT_EQ(hook.core().firstError(), "");
  }
  Trial trial(dir.path());
  EXPECT_EQ(trial.tensorNames("weights"),
            (std::vector<std::string>{"Sequential_0.weight", "Sequential_2.weight"}));
  EXPECT_EQ(trial.tensorNames("biases"),
            (std::vector<std::string>{"Sequential_0.bias", "Sequential_2.bias"}));
  EXPECT_EQ(trial.tensorNames("gradients"),
            (std::vector<std::string>{"gradient/Sequential_0.bias", "gradient/Sequential_0.weight",
                                      "gradient/Sequential_2.weight"}));
  EXPECT_EQ(trial.tensorNames("losses"), (std::vector<std::string>{"MSELoss_output_0"}));
  EXPECT_EQ(trial.tensor("1_output_0").value(2).shape, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(trial.tensor("Sequential_0.weight").steps(), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(trial.tensor("scalar/step_times_two").steps(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_DOUBLE_EQ(trial.tensor("scalar/step_times_two").value(1).scalar(), 2.0);
  const auto w = trial.tensor("Sequential_2.weight").value(2).toDoubles();
  const auto expected = net->named_parameters()["2.weight"].flatten();
  ASSERT_EQ(w.size(), 6u);
  for (size_t i = 0; i < w.size(); ++i) EXPECT_FLOAT_EQ(float(w[i]), expected[i].item<float>());
}

TEST(TorchHook, ConvertsDtypesAndStridedTensors) {
  TempDir dir;
  {
    TorchHook hook(debuggerConfig(R"({"save_interval": 1, "collections": [{"name": "all"}]})"), testing::hookOptions(dir.path()));
    hook.beginStep(Mode::kTrain);
    const auto base = torch::arange(12, torch::kFloat32).reshape({3, 4});
    EXPECT_TRUE(hook.saveTensor("transposed", base.t()));  // non-contiguous
    EXPECT_TRUE(hook.saveTensor("bf16", base.to(torch::kBFloat16)));
    EXPECT_TRUE(hook.saveTensor("int8", base.to(torch::kInt8)));
    EXPECT_TRUE(hook.saveTensor("flags", base > 5));
    EXPECT_FALSE(hook.saveTensor("complex", torch::zeros({2}, torch::kComplexFloat)));
    EXPECT_FALSE(hook.saveTensor("undefined", torch::Tensor()));
    hook.close(true);
  }
  Trial trial(dir.path());
  const TensorData t = trial.tensor("transposed").value(0);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(t.toDoubles()[1], 4.0);  // row 0 of the transpose: 0, 4, 8
  EXPECT_EQ(trial.tensor("bf16").value(0).dtype, DType::kFloat32);
  EXPECT_EQ(trial.tensor("bf16").value(0).toDoubles()[11], 11.0);
  EXPECT_EQ(trial.tensor("int8").value(0).dtype, DType::kInt32);
  EXPECT_EQ(trial.tensor("flags").value(0).dtype, DType::kBool);
  EXPECT_EQ(trial.tensor("flags").value(0).toDoubles()[6], 1.0);
  EXPECT_FALSE(trial.hasTensor("complex"));
}

TEST(TorchHook, UserCallsAreNoOpsWithoutAHook) {
  setActiveHook(nullptr);
  EXPECT_FALSE(enabled());
  save_scalar("x", 1.0);
  EXPECT_FALSE(save_tensor("x", torch::ones({1})));
}

}  // namespace
}  // namespace strata::debugger
