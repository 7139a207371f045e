// Nested modules' outputs under smdebug's names: a Sequential holding NestedSequentials (at
// two levels) is captured child by child, each module as "<module path>_output_0"
// ("layer1.0.relu_output_0"), with values equal to a manual forward through the same modules;
// a custom module (its own forward) is captured as one piece, and the modules inside it
// through strata::debugger::module_output.
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <algorithm>

#include "../debugger/debugger_testing.h"
#include "adapter/observe/job_observers.h"
#include "adapter/observe/layer_instrumentation.h"
#include "adapter/observe/observers.h"
#include "debugger/torch_hook.h"
#include "debugger/trial.h"
#include "strata/debugger.h"
#include "strata/nested_sequential.h"

namespace strata::instrument {
// Named, not anonymous: the test binary compiles in unity batches beside sources with
// helpers of the same names.
namespace nested_capture_test {

using debugger::testing::TempDir;
using observe::observers;

struct Registered {
  std::shared_ptr<observe::StepObserver> observer;
  explicit Registered(std::shared_ptr<observe::StepObserver> o) : observer(std::move(o)) { observers().add(observer); }
  ~Registered() { observers().remove(observer.get()); }
};

// A module with its own forward: its inside is not a chain of children.
struct ScaledImpl : torch::nn::Module {
  ScaledImpl() : lin(register_module("lin", torch::nn::Linear(2, 2))) {}
  torch::Tensor forward(const torch::Tensor& x) { return lin->forward(x) * 3; }
  torch::nn::Linear lin;
};
TORCH_MODULE(Scaled);

void expectSameValues(const debugger::TensorData& saved, const torch::Tensor& expected, const std::string& name) {
  const torch::Tensor e = expected.detach().to(torch::kFloat64).contiguous().flatten();
  ASSERT_EQ(saved.shape, std::vector<int64_t>(expected.sizes().begin(), expected.sizes().end())) << name;
  const std::vector<double> values = saved.toDoubles();
  ASSERT_EQ(values.size(), static_cast<size_t>(e.numel())) << name;
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_FLOAT_EQ(static_cast<float>(values[i]), static_cast<float>(e[static_cast<int64_t>(i)].item<double>()))
        << name << "[" << i << "]";
}

TEST(NestedCapture, NestedSequentialsAreCapturedUnderTheirModulePaths) {
  torch::manual_seed(5);
  NestedSequential inner;
  inner->push_back("conv", torch::nn::Linear(4, 4));
  inner->push_back("relu", torch::nn::ReLU());
  NestedSequential layer1;
  layer1->push_back("0", inner);
  layer1->push_back("1", torch::nn::Linear(4, 2));
  torch::nn::Sequential net;
  net->push_back("fc", torch::nn::Linear(3, 4));
  net->push_back("layer1", layer1);
  net->push_back("custom", Scaled());

  TempDir dir;
  const torch::Tensor x = torch::randn({5, 3});
  torch::Tensor result;
  {
    Registered debuggerObserver(observe::makeDebuggerObserver(
        debugger::testing::debuggerConfig(R"({"collections": [
        {"name": "outputs", "save_interval": 1}, {"name": "inputs", "save_interval": 1},
        {"name": "relus", "include_regex": ".*relu_output", "save_interval": 1}]})"),
        debugger::testing::hookOptions(dir.path())));
    debugger::TorchHook& hook = *debugger::activeHook();
    observers().stepBegin(0, Mode::kTrain, 0);
    std::function<torch::Tensor(const torch::Tensor&)> own = [net](const torch::Tensor& in) mutable {
      return net->forward(in);
    };
    result = forward(*net, own, x, /*forwardIsModulesOwn=*/true);
    observers().stepEnd(0);
    debugger::setActiveHook(nullptr);
    hook.close(true);
    EXPECT_EQ(hook.core().firstError(), "");
  }
  EXPECT_TRUE(torch::equal(result, net->forward(x)));

  // The manual forward, module by module.
  auto fc = net->named_children()["fc"]->as<torch::nn::Linear>();
  auto conv = inner->named_children()["conv"]->as<torch::nn::Linear>();
  auto lin1 = layer1->named_children()["1"]->as<torch::nn::Linear>();
  auto scaled = net->named_children()["custom"]->as<ScaledImpl>();
  const torch::Tensor h = fc->forward(x);
  const torch::Tensor c = conv->forward(h);
  const torch::Tensor r = torch::relu(c);
  const torch::Tensor l1 = lin1->forward(r);
  const torch::Tensor out = scaled->forward(l1);

  debugger::Trial trial(dir.path());
  EXPECT_EQ(trial.tensorNames("relus"), (std::vector<std::string>{"layer1.0.relu_output_0"}));
  EXPECT_EQ(trial.tensorNames("outputs"),
            (std::vector<std::string>{"Sequential_output_0", "custom_output_0", "fc_output_0",
                                      "layer1.0.conv_output_0", "layer1.0.relu_output_0", "layer1.0_output_0",
                                      "layer1.1_output_0", "layer1_output_0"}));
  const auto inputs = trial.tensorNames("inputs");
  EXPECT_TRUE(std::find(inputs.begin(), inputs.end(), "layer1.0.relu_input_0") != inputs.end());
  expectSameValues(trial.tensor("fc_output_0").value(0), h, "fc");
  expectSameValues(trial.tensor("layer1.0.conv_input_0").value(0), h, "layer1.0.conv input");
  expectSameValues(trial.tensor("layer1.0.conv_output_0").value(0), c, "layer1.0.conv");
  expectSameValues(trial.tensor("layer1.0.relu_output_0").value(0), r, "layer1.0.relu");
  expectSameValues(trial.tensor("layer1.0_output_0").value(0), r, "layer1.0");
  expectSameValues(trial.tensor("layer1.1_output_0").value(0), l1, "layer1.1");
  expectSameValues(trial.tensor("layer1_input_0").value(0), h, "layer1 input");
  expectSameValues(trial.tensor("layer1_output_0").value(0), l1, "layer1");
  expectSameValues(trial.tensor("custom_output_0").value(0), out, "custom");
  expectSameValues(trial.tensor("Sequential_output_0").value(0), out, "Sequential");
}

// A ResNet-style block with a forward of its own: its modules are offered with
// strata::debugger::module_output, as a Python forward hook would see them.
struct BlockImpl : torch::nn::Module {
  BlockImpl()
      : conv(register_module("conv", torch::nn::Linear(3, 3))), relu(register_module("relu", torch::nn::ReLU())) {}
  torch::Tensor forward(const torch::Tensor& x) {
    const torch::Tensor y = debugger::module_output(*conv, conv->forward(x));
    return debugger::module_output(*relu, relu->forward(y)) + x;
  }
  torch::nn::Linear conv;
  torch::nn::ReLU relu;
};
TORCH_MODULE(Block);

TEST(NestedCapture, CustomModulesOfferTheirModulesOutputs) {
  torch::manual_seed(8);
  NestedSequential layer1;
  layer1->push_back("0", Block());
  layer1->push_back("1", Block());
  torch::nn::Sequential net;
  net->push_back("layer1", layer1);
  TempDir dir;
  std::vector<torch::Tensor> inputs = {torch::randn({2, 3}), torch::randn({2, 3})};
  {
    Registered debuggerObserver(observe::makeDebuggerObserver(
        debugger::testing::debuggerConfig(R"({"collections": [{"name": "relus", "include_regex": "relu_output",
                                              "save_steps": [0]}]})"),
        debugger::testing::hookOptions(dir.path())));
    debugger::TorchHook& hook = *debugger::activeHook();
    std::function<torch::Tensor(const torch::Tensor&)> own = [net](const torch::Tensor& in) mutable {
      return net->forward(in);
    };
    for (int64_t step = 0; step < 2; ++step) {  // step 1 is not due: module_output saves nothing
      observers().stepBegin(step, Mode::kTrain, step);
      forward(*net, own, inputs[static_cast<size_t>(step)], /*forwardIsModulesOwn=*/true);
      observers().stepEnd(step);
    }
    debugger::module_output(*net, inputs[0]);  // outside any captured forward: nothing
    debugger::setActiveHook(nullptr);
    hook.close(true);
    EXPECT_EQ(hook.core().firstError(), "");
  }
  auto b0 = layer1->named_children()["0"]->as<BlockImpl>();
  const torch::Tensor r0 = torch::relu(b0->conv->forward(inputs[0]));
  const torch::Tensor h0 = r0 + inputs[0];
  auto b1 = layer1->named_children()["1"]->as<BlockImpl>();
  const torch::Tensor r1 = torch::relu(b1->conv->forward(h0));
  debugger::Trial trial(dir.path());
  EXPECT_EQ(trial.tensorNames(), (std::vector<std::string>{"layer1.0.relu_output_0", "layer1.1.relu_output_0"}));
  EXPECT_EQ(trial.tensor("layer1.0.relu_output_0").steps(), (std::vector<int64_t>{0}));
  expectSameValues(trial.tensor("layer1.0.relu_output_0").value(0), r0, "layer1.0.relu");
  expectSameValues(trial.tensor("layer1.1.relu_output_0").value(0), r1, "layer1.1.relu");
}

TEST(NestedCapture, NestedChildrenAreNotRunSeparatelyWhenNothingWantsThem) {
  torch::manual_seed(6);
  NestedSequential block;
  block->push_back("a", torch::nn::Linear(2, 2));
  block->push_back("b", torch::nn::Tanh());
  torch::nn::AnyModule any(block);
  const torch::Tensor x = torch::randn({3, 2});
  observe::Interest nothing;
  EXPECT_TRUE(torch::equal(forwardChild("block", any, torch::nn::AnyValue(x), nothing).get<torch::Tensor>(),
                           block->forward(x)));
  observe::Interest tensors;
  tensors.layerTensors = true;  // no observer registered: nothing reported, same result
  EXPECT_TRUE(torch::equal(forwardChild("block", any, torch::nn::AnyValue(x), tensors).get<torch::Tensor>(),
                           block->forward(x)));
}

}  // namespace nested_capture_test
}  // namespace strata::instrument
