// Per-layer instrumentation of a libtorch Sequential (src/adapter/observe/layer_instrumentation.h):
// captured inputs/outputs equal a manual forward, read back by our trial reader and by the
// independent Python decoder; the framework timeline has forward and backward per layer,
// data loading and AllReduce slices, nested per track, only inside the profiling window, and
// the model's own forward and backward at every step.
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "../debugger/debugger_testing.h"
#include "../profiler/profiler_test_util.h"
#include "../profiler/trace_check.h"
#include "debugger/torch_hook.h"
#include "debugger/trial.h"
#include "profiler/session.h"
#include "profiler/timeline_reader.h"
#include "adapter/observe/job_observers.h"
#include "adapter/observe/layer_instrumentation.h"
#include "adapter/observe/observers.h"

namespace strata::instrument {
namespace {

namespace fs = std::filesystem;
using debugger::testing::TempDir;
using profiler::testing::stepWindow;
using observe::Interest;
using observe::observers;

// Registers an observer for the scope (the process's Observers are what training reports to).
struct Registered {
  std::shared_ptr<observe::StepObserver> observer;
  explicit Registered(std::shared_ptr<observe::StepObserver> o) : observer(std::move(o)) { observers().add(observer); }
  ~Registered() { observers().remove(observer.get()); }
};

torch::nn::Sequential namedNet() {
  torch::manual_seed(7);
  return torch::nn::Sequential({{"fc1", torch::nn::Linear(4, 6)},
                                {"relu", torch::nn::ReLU()},
                                {"fc2", torch::nn::Linear(6, 3)}});
}

void expectSameValues(const debugger::TensorData& saved, const torch::Tensor& expected) {
  const torch::Tensor e = expected.detach().to(torch::kFloat64).contiguous().flatten();
  ASSERT_EQ(saved.shape, std::vector<int64_t>(expected.sizes().begin(), expected.sizes().end()));
  const std::vector<double> values = saved.toDoubles();
  ASSERT_EQ(values.size(), static_cast<size_t>(e.numel()));
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_FLOAT_EQ(static_cast<float>(values[i]), static_cast<float>(e[static_cast<int64_t>(i)].item<double>()));
}

TEST(LayerInstrumentation, SequentialLayersPairNamesWithModules) {
  auto net = namedNet();
  const auto layers = sequentialLayers(*net);
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_EQ(layers[0].path, "fc1");
  EXPECT_EQ(layers[1].path, "relu");
  EXPECT_EQ(layers[2].path, "fc2");
  EXPECT_EQ(layers[1].module.ptr().get(), net[1].get());
  torch::nn::Sequential numbered(torch::nn::Linear(2, 2), torch::nn::ReLU());
  EXPECT_EQ(sequentialLayers(*numbered)[1].path, "1");
}

TEST(LayerInstrumentation, CaptureOncePerGlobalStepWhileDue) {
  EXPECT_TRUE(captureThisForward(true, 0, -1));
  EXPECT_FALSE(captureThisForward(true, 0, 0));  // second forward of the step
  EXPECT_TRUE(captureThisForward(true, 3, 0));
  EXPECT_FALSE(captureThisForward(false, 3, 0));
  EXPECT_FALSE(captureThisForward(true, -1, -2));  // before the first step
}

TEST(LayerInstrumentation, RunLayersEqualsTheSequentialForward) {
  auto net = namedNet();
  auto layers = sequentialLayers(*net);
  const auto x = torch::randn({5, 4});
  Interest nothing;
  EXPECT_TRUE(torch::equal(runLayers("Sequential", layers, x, nothing), net->forward(x)));
  Interest both;
  both.layerTensors = both.times = true;  // no observer: still the same result
  EXPECT_TRUE(torch::equal(runLayers("Sequential", layers, x, both), net->forward(x)));
}

TEST(LayerInstrumentation, CapturedInputsAndOutputsEqualAManualForward) {
  TempDir dir;
  auto net = namedNet();
  std::vector<torch::Tensor> inputs;
  {
    Registered debuggerObserver(observe::makeDebuggerObserver(
        debugger::testing::debuggerConfig(R"({"collections": [
        {"name": "outputs", "save_interval": 1}, {"name": "inputs", "save_interval": 1},
        {"name": "relu", "include_regex": ".*relu_output", "save_interval": 2}]})"),
        debugger::testing::hookOptions(dir.path())));
    debugger::TorchHook& hook = *debugger::activeHook();
    for (int step = 0; step < 3; ++step) {
      observers().stepBegin(step, Mode::kTrain);
      inputs.push_back(torch::randn({2, 4}));
      auto layers = sequentialLayers(*net);
      const Interest interest = observers().interest(net.get());
      EXPECT_TRUE(interest.layerTensors);
      runLayers("Sequential", layers, inputs.back(), interest);
      // A second forward in the same step (micro-batch, evaluation) is not captured.
      EXPECT_FALSE(observers().interest(net.get()).layerTensors);
      runLayers("Sequential", layers, torch::full({2, 4}, 100.0), observers().interest(net.get()));
    }
    debugger::setActiveHook(nullptr);
    hook.close(true);
    EXPECT_EQ(hook.core().firstError(), "");
  }
  debugger::Trial trial(dir.path());
  EXPECT_EQ(trial.tensorNames("outputs"),
            (std::vector<std::string>{"Sequential_output_0", "fc1_output_0", "fc2_output_0", "relu_output_0"}));
  EXPECT_EQ(trial.tensorNames("inputs"),
            (std::vector<std::string>{"Sequential_input_0", "fc1_input_0", "fc2_input_0", "relu_input_0"}));
  EXPECT_EQ(trial.tensorNames("relu"), (std::vector<std::string>{"relu_output_0"}));
  EXPECT_EQ(trial.tensor("relu_output_0").steps(), (std::vector<int64_t>{0, 1, 2}));
  auto fc1 = net->named_children()["fc1"]->as<torch::nn::Linear>();
  auto fc2 = net->named_children()["fc2"]->as<torch::nn::Linear>();
  for (int step = 0; step < 3; ++step) {
    const torch::Tensor h = fc1->forward(inputs[step]);
    const torch::Tensor r = torch::relu(h);
    expectSameValues(trial.tensor("Sequential_input_0").value(step), inputs[step]);
    expectSameValues(trial.tensor("fc1_input_0").value(step), inputs[step]);
    expectSameValues(trial.tensor("fc1_output_0").value(step), h);
    expectSameValues(trial.tensor("relu_input_0").value(step), h);
    expectSameValues(trial.tensor("relu_output_0").value(step), r);
    expectSameValues(trial.tensor("fc2_output_0").value(step), fc2->forward(r));
    expectSameValues(trial.tensor("Sequential_output_0").value(step), net->forward(inputs[step]));
  }

  // The independent reader: Debian's python3-protobuf with a .proto compiled at test time.
  const std::string missing = debugger::testing::pythonDecoderMissing();
  if (!missing.empty()) GTEST_SKIP() << missing << ": the Python check is skipped";
  TempDir work;
  std::string out;
  const int status = debugger::testing::decodeWithPython(dir.path(), work.path(), &out);
  if (status == 2) GTEST_SKIP() << "decode_events.py found its environment incomplete";
  ASSERT_EQ(status, 0) << out;
  const auto j = nlohmann::json::parse(out);
  const auto& relu = j["tensors"]["relu_output_0"]["1"];
  EXPECT_EQ(relu["mode"], "TRAIN");
  EXPECT_EQ(relu["shape"], nlohmann::json::array({2, 6}));
  const torch::Tensor r1 = torch::relu(fc1->forward(inputs[1])).flatten();
  ASSERT_EQ(relu["values"].size(), 12u);
  for (int64_t i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(relu["values"][i].get<float>(), r1[i].item<float>());
}

profiler::SessionInfo sessionInfo(const std::string& dir) {
  profiler::SessionInfo info;
  info.outputDir = dir;
  info.hostname = "layer-test";
  info.makeCurrent = true;
  return info;
}

bool within(const profiler::TraceEvent& inner, const profiler::TraceEvent& outer) {
  return outer.startUs <= inner.startUs && inner.endUs <= outer.endUs;
}

TEST(LayerInstrumentation, TimelineHasPerLayerForwardBackwardDataLoadingAndAllReduce) {
  using namespace std::chrono_literals;
  TempDir dir;
  auto net = namedNet();
  std::string root;
  {
    auto prof = profiler::Session::start(stepWindow(1, 2), sessionInfo(dir.path()));
    ASSERT_EQ(profiler::current(), prof.get());
    Registered profilerObserver(observe::makeProfilerObserver());
    root = prof->profilerRoot();
    for (int64_t step = 0; step < 4; ++step) {
      observers().batchRequested();
      std::this_thread::sleep_for(1ms);  // "loading"
      observers().stepBegin(step, Mode::kTrain);
      auto layers = sequentialLayers(*net);
      const Interest interest = observers().interest(net.get());
      EXPECT_EQ(interest.times, step == 1 || step == 2) << step;
      const auto out = runLayers("Sequential", layers, torch::randn({8, 4}), interest);
      out.pow(2).mean().backward();
      {
        // Two buckets launched during backward, reported as the gradient reducer does.
        const int64_t now = observers().nowIfTiming();
        const int64_t waitStart = interest.times ? now : -1;
        std::this_thread::sleep_for(200us);
        observers().gradientSync(observe::spanSince(waitStart), {{0, 96, now < 0 ? -1 : now - 300, 100},
                                                                 {1, 32, now < 0 ? -1 : now - 250, 100}});
      }
      observers().stepEnd(step);
    }
    prof->stop();
  }
  profiler::TimelineReader reader(root);
  ASSERT_FALSE(reader.files().empty());
  for (const auto& f : reader.files()) {
    std::ifstream in(f.path);
    std::stringstream text;
    text << in.rdbuf();
    const auto problems = profiler::testing::perfettoProblems(nlohmann::json::parse(text.str()));
    EXPECT_TRUE(problems.empty()) << f.path << ": " << (problems.empty() ? "" : problems.front());
  }
  const auto events = reader.events({});
  std::map<int64_t, profiler::TraceEvent> steps;
  std::map<int64_t, std::map<std::string, std::vector<profiler::TraceEvent>>> byStep;  // step -> phase -> events
  for (const auto& e : events) {
    ASSERT_TRUE(e.stepNum().has_value()) << e.name;
    if (e.phase == "Step:ModeKeys.TRAIN") steps[*e.stepNum()] = e;
    else byStep[*e.stepNum()][e.phase].push_back(e);
  }
  ASSERT_EQ(steps.size(), 4u);  // every step: smdebug writes step events outside the window too
  // Outside the window (steps 0 and 3): the model's own forward and backward only.
  for (int64_t step : {0, 3}) {
    std::vector<std::string> seen;
    for (const auto& [phase, list] : byStep[step]) seen.push_back(phase + " x" + std::to_string(list.size()));
    EXPECT_EQ(seen, (std::vector<std::string>{"Backward(post-forward) x1", "Forward x1"})) << step;
  }
  for (int64_t step : {1, 2}) {
    auto& phases = byStep[step];
    const profiler::TraceEvent& stepEvent = steps[step];
    auto names = [&](const std::string& phase) {
      std::vector<std::string> out;
      for (const auto& e : phases[phase]) out.push_back(e.name);
      return out;
    };
    EXPECT_EQ(names("Forward"), (std::vector<std::string>{"Sequential"}));
    EXPECT_EQ(names("Forward-SubModuleInternal"), (std::vector<std::string>{"fc1", "relu", "fc2"}));
    EXPECT_EQ(names("Backward(post-forward)"), (std::vector<std::string>{"Sequential"}));
    std::vector<std::string> backward = names("Backward-SubModuleInternal");
    std::sort(backward.begin(), backward.end());
    EXPECT_EQ(backward, (std::vector<std::string>{"fc1", "fc2", "relu"}));
    EXPECT_EQ(names("DataLoaderIter").size(), 1u);
    EXPECT_EQ(names("AllReduce"), (std::vector<std::string>{"bucket 0", "bucket 1"}));
    EXPECT_EQ(names("AllReduceWait").size(), 1u);
    if (phases["Forward"].empty() || phases["Backward(post-forward)"].empty()) continue;
    const auto& forward = phases["Forward"][0];
    const auto& backwardAll = phases["Backward(post-forward)"][0];
    EXPECT_TRUE(within(forward, stepEvent));
    EXPECT_TRUE(within(backwardAll, stepEvent));
    EXPECT_LE(forward.endUs, backwardAll.startUs);
    for (const auto& e : phases["Forward-SubModuleInternal"]) EXPECT_TRUE(within(e, forward)) << e.name;
    std::map<std::string, profiler::TraceEvent> bw;
    for (const auto& e : phases["Backward-SubModuleInternal"]) {
      EXPECT_TRUE(within(e, backwardAll)) << e.name;
      bw[e.name] = e;
    }
    // Reverse order, back to back: fc2, then relu, then fc1.
    EXPECT_LE(bw["fc2"].endUs, bw["relu"].startUs + 0);
    EXPECT_LE(bw["relu"].endUs, bw["fc1"].startUs + 0);
    // Data loading ends where the step begins; comm and compute on their own tracks.
    EXPECT_EQ(phases["DataLoaderIter"][0].endUs, stepEvent.startUs);
    EXPECT_GE(phases["DataLoaderIter"][0].durUs, 1000);
    EXPECT_EQ(phases["AllReduce"][0].tid, 3);
    EXPECT_EQ(phases["AllReduceWait"][0].tid, 2);
    EXPECT_EQ(phases["AllReduce"][0].args["bytes"], 96);
    EXPECT_LE(phases["AllReduce"][0].endUs, phases["AllReduce"][1].startUs);
  }
}

// DistributedModel says whether its forward function is the module's own (its module-holder
// constructors): only then are a Sequential's children run one by one. A user's forward
// function (here: twice the Sequential's output) runs as one piece, and its result is kept.
TEST(LayerInstrumentation, OnlyTheModulesOwnForwardIsRunChildByChild) {
  TempDir dir;
  auto net = namedNet();
  const torch::Tensor x = torch::randn({5, 4});
  std::function<torch::Tensor(const torch::Tensor&)> own = [net](const torch::Tensor& in) mutable {
    return net->forward(in);
  };
  std::function<torch::Tensor(const torch::Tensor&)> custom = [net](const torch::Tensor& in) mutable {
    return net->forward(in) * 2;
  };
  std::string root;
  {
    auto prof = profiler::Session::start(stepWindow(0, 2), sessionInfo(dir.path()));
    Registered profilerObserver(observe::makeProfilerObserver());
    root = prof->profilerRoot();
    prof->stepBegin(0);
    EXPECT_TRUE(torch::equal(forward(*net, own, x, /*forwardIsModulesOwn=*/true), net->forward(x)));
    prof->stepEnd(0);
    prof->stepBegin(1);
    EXPECT_TRUE(torch::equal(forward(*net, custom, x, /*forwardIsModulesOwn=*/false), net->forward(x) * 2));
    prof->stepEnd(1);
    prof->stop();
  }
  profiler::TimelineReader reader(root);
  std::map<int64_t, std::vector<std::string>> layers, models;  // step -> names
  for (const auto& e : reader.events({})) {
    if (e.phase == "Forward-SubModuleInternal") layers[e.stepNum().value_or(-1)].push_back(e.name);
    if (e.phase == "Forward") models[e.stepNum().value_or(-1)].push_back(e.name);
  }
  EXPECT_EQ(layers[0], (std::vector<std::string>{"fc1", "relu", "fc2"}));
  EXPECT_TRUE(layers[1].empty());
  EXPECT_EQ(models[0], (std::vector<std::string>{"Sequential"}));
  EXPECT_EQ(models[1], (std::vector<std::string>{"Sequential"}));
}

}  // namespace
}  // namespace strata::instrument

namespace strata::instrument {
namespace {

// A pipeline stage runs its layers itself (seeding each one) and its input is an activation
// received from the previous stage, which requires a gradient: the first layer's backward
// then ends when the input's gradient arrives.
TEST(LayerInstrumentation, RecorderForAStageWhoseInputNeedsAGradient) {
  TempDir dir;
  auto net = namedNet();
  auto layers = sequentialLayers(*net);
  std::string root;
  torch::Tensor result, expected;
  const torch::Tensor received = torch::randn({3, 4}).requires_grad_();
  {
    auto prof = profiler::Session::start(stepWindow(0, 1), sessionInfo(dir.path()));
    Registered profilerObserver(observe::makeProfilerObserver());
    root = prof->profilerRoot();
    prof->stepBegin(0);
    Interest interest;
    interest.times = true;
    observe::LayerChain chain;
    chain.topName = "stage1";
    for (const auto& l : layers) chain.paths.push_back(l.path);
    LayerRecorder rec(chain, received, interest, [&](size_t i) { return layers[i].module.ptr()->parameters(true); });
    torch::Tensor y = received;
    for (size_t i = 0; i < layers.size(); ++i) {
      torch::manual_seed(static_cast<uint64_t>(100 + i));  // the executor's per-layer seeding
      rec.begin(i);
      y = layers[i].module.forward(y);
      rec.end(i, &y);
    }
    rec.finish(y);
    result = y;
    y.sum().backward();
    prof->stepEnd(0);
    prof->stop();
  }
  EXPECT_TRUE(torch::allclose(result, net->forward(received)));
  ASSERT_TRUE(received.grad().defined());
  std::map<std::string, std::vector<std::string>> names;
  for (const auto& e : profiler::TimelineReader(root).events({})) names[e.phase].push_back(e.name);
  EXPECT_EQ(names["Forward"], (std::vector<std::string>{"stage1"}));
  EXPECT_EQ(names["Forward-SubModuleInternal"], (std::vector<std::string>{"fc1", "relu", "fc2"}));
  EXPECT_EQ(names["Backward(post-forward)"], (std::vector<std::string>{"stage1"}));
  auto backward = names["Backward-SubModuleInternal"];
  std::sort(backward.begin(), backward.end());
  EXPECT_EQ(backward, (std::vector<std::string>{"fc1", "fc2", "relu"}));
}

}  // namespace
}  // namespace strata::instrument
