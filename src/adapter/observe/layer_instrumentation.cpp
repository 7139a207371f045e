#include "adapter/observe/layer_instrumentation.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/modules/container/sequential.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <typeinfo>
#include <unordered_map>

#include "adapter/observe/observers.h"
#include "strata/nested_sequential.h"
#include "debugger/naming.h"
#include "profiler/layer_timeline.h"

namespace strata::instrument {
namespace {

using observe::observers;
using observe::Span;

// Any observer's clock: model-level times are wanted outside the detailed window too.
int64_t nowUs() { return observers().clockUs(); }

// When one backward's hooks fired; shared by the hooks of one forward.
struct BackwardTimes {
  std::string topName;
  std::vector<std::string> paths;
  std::mutex mu;                      // hooks may run on an autograd worker thread
  std::vector<int64_t> outputGradUs;  // per layer, -1 until its output's gradient arrives
  int firstPending = 0;               // first differentiable layer's gradients still to come
  int64_t firstDoneUs = -1;
  bool perLayer = true;
  bool reportWhole = true;  // false: the caller reports the chain's backward (pipeline stages)
  bool reported = false;
};

// Called with t.mu held, once: the backward's spans (profiler/layer_timeline.h decides them).
void reportBackward(BackwardTimes& t) {
  t.reported = true;
  const profiler::BackwardSlices slices = profiler::backwardSlices(t.outputGradUs, t.firstDoneUs);
  if (slices.whole && t.reportWhole)
    observers().chainBackward(t.topName, Span{slices.whole->startUs, slices.whole->durUs});
  if (!t.perLayer) return;
  for (const auto& l : slices.layers)
    observers().layerBackward(t.paths[l.layer], Span{l.interval.startUs, l.interval.durUs});
}

void firstLayerGradientDone(BackwardTimes& t) {
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.reported || t.firstPending <= 0) return;
  t.firstDoneUs = nowUs();
  if (--t.firstPending == 0) reportBackward(t);
}

// Gradient-accumulator hooks live on the parameters' accumulators, which outlive the
// graph: they are removed at the next instrumented forward of this thread.
struct AccumulatorHook {
  std::weak_ptr<torch::autograd::Node> node;
  uintptr_t key = 0;
};
thread_local std::vector<AccumulatorHook> tAccumulatorHooks;

void removeAccumulatorHooks() {
  for (const auto& h : tAccumulatorHooks)
    if (auto node = h.node.lock()) node->del_post_hook(h.key);
  tAccumulatorHooks.clear();
}

void hookParametersOfFirstLayer(const std::shared_ptr<BackwardTimes>& times, const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> trained;
  for (const auto& p : params)
    if (p.requires_grad()) trained.push_back(p);
  times->firstPending = static_cast<int>(trained.size());
  for (const auto& p : trained) {
    std::shared_ptr<torch::autograd::Node> acc = torch::autograd::impl::grad_accumulator(p);
    if (!acc) continue;
    const uintptr_t key = acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [times](const torch::autograd::variable_list& outs, const torch::autograd::variable_list&) {
          firstLayerGradientDone(*times);
          return outs;
        }));
    tAccumulatorHooks.push_back({acc, key});
  }
}

// Arms the backward timing of one forward: `outputs[i]` is layer i's output; `paramsOf(i)`
// the parameters of layer i. With `perLayer` false only the chain's backward is reported
// (the model ran as one piece). With `callerEnds` (pipeline stages) only the outputs are
// hooked: the first differentiable layer ends when the caller calls
// firstLayerGradientDone on the returned times (its backward call returned), and the
// chain's whole backward is not reported (the stage reports its own). Returns the times
// (nullptr when nothing is differentiable).
std::shared_ptr<BackwardTimes> armBackward(const std::string& topName, const std::vector<std::string>& paths,
                                           const torch::Tensor& input, const std::vector<torch::Tensor>& outputs,
                                           const std::function<std::vector<torch::Tensor>(size_t)>& paramsOf,
                                           bool perLayer, bool callerEnds = false) {
  auto times = std::make_shared<BackwardTimes>();
  times->topName = topName;
  times->paths = paths;
  times->perLayer = perLayer;
  times->reportWhole = !callerEnds;
  times->outputGradUs.assign(outputs.size(), -1);
  size_t first = outputs.size();
  for (size_t i = 0; i < outputs.size() && first == outputs.size(); ++i)
    if (outputs[i].defined() && outputs[i].requires_grad()) first = i;
  if (first == outputs.size()) return nullptr;  // nothing differentiable
  for (size_t i = first; i < outputs.size(); ++i) {
    if (!outputs[i].defined() || !outputs[i].requires_grad()) continue;
    torch::Tensor out = outputs[i];
    out.register_hook([times, i](const torch::Tensor&) {
      std::lock_guard<std::mutex> lock(times->mu);
      if (times->outputGradUs[i] < 0) times->outputGradUs[i] = nowUs();
    });
  }
  if (callerEnds) {
    times->firstPending = 1;
    return times;
  }
  if (first == 0 && input.defined() && input.requires_grad()) {
    // The batch itself wants a gradient: the first layer is done when it arrives.
    times->firstPending = 1;
    torch::Tensor in = input;
    in.register_hook([times](const torch::Tensor&) { firstLayerGradientDone(*times); });
    return times;
  }
  hookParametersOfFirstLayer(times, paramsOf(first));
  return times;
}

// The module paths of the model whose layer tensors this thread is capturing (set by
// forward() for its duration), for module_output calls from inside custom modules.
using ModulePaths = std::unordered_map<const torch::nn::Module*, std::string>;
thread_local const ModulePaths* tCapturePaths = nullptr;

class CapturePathsScope {
 public:
  CapturePathsScope(torch::nn::Module& model, bool capturing) : previous_(tCapturePaths) {
    if (!capturing) return;
    for (const auto& item : model.named_modules(/*name_prefix=*/"", /*include_self=*/false))
      paths_.emplace(item.value().get(), item.key());
    tCapturePaths = &paths_;
  }
  ~CapturePathsScope() { tCapturePaths = previous_; }
  CapturePathsScope(const CapturePathsScope&) = delete;
  CapturePathsScope& operator=(const CapturePathsScope&) = delete;

 private:
  const ModulePaths* previous_;
  ModulePaths paths_;
};

// A child whose forward is exactly the chain of its own children (torch::nn::Sequential or
// strata::NestedSequential themselves, not a subclass that may define another forward).
torch::nn::SequentialImpl* plainSequential(const torch::nn::AnyModule& module) {
  torch::nn::Module* m = module.ptr().get();
  if (m == nullptr) return nullptr;
  const std::type_info& type = typeid(*m);
  if (type != typeid(torch::nn::SequentialImpl) && type != typeid(NestedSequentialImpl)) return nullptr;
  auto* sequential = dynamic_cast<torch::nn::SequentialImpl*>(m);
  return sequential->is_empty() ? nullptr : sequential;
}

}  // namespace

torch::nn::AnyValue forwardChild(const std::string& path, torch::nn::AnyModule& module, torch::nn::AnyValue input,
                                 const observe::Interest& interest) {
  torch::nn::SequentialImpl* nested = (interest.layerTensors || interest.times) ? plainSequential(module) : nullptr;
  std::vector<Layer> children = nested != nullptr ? sequentialLayers(*nested) : std::vector<Layer>();
  if (children.empty()) return module.any_forward(std::move(input));
  // Run the nested Sequential's children here, as its forward would, reporting each under
  // its module path ("block.0.relu"), smdebug's names for nested modules.
  observe::Observers& obs = observers();
  torch::nn::AnyValue value = std::move(input);
  for (Layer& child : children) {
    const std::string childPath = path + "." + child.path;
    const int64_t start = interest.times ? nowUs() : -1;
    const torch::Tensor* in = value.try_get<torch::Tensor>();
    const torch::Tensor inCopy = (interest.layerTensors && in != nullptr) ? *in : torch::Tensor();
    value = forwardChild(childPath, child.module, std::move(value), interest);
    if (interest.times) obs.layerForward(childPath, observe::spanSince(start));
    if (interest.layerTensors) {
      if (inCopy.defined()) obs.moduleInput(childPath, inCopy);
      if (const torch::Tensor* out = value.try_get<torch::Tensor>()) obs.moduleOutput(childPath, *out);
    }
  }
  return value;
}

std::vector<Layer> sequentialLayers(torch::nn::SequentialImpl& sequential) {
  const auto children = sequential.named_children();
  if (children.size() != sequential.size()) return {};
  std::vector<Layer> layers;
  layers.reserve(sequential.size());
  size_t i = 0;
  for (auto& any : sequential) {
    const auto& child = children[i++];
    if (child.value().get() != any.ptr().get()) return {};  // registered out of order
    layers.push_back({child.key(), any});
  }
  return layers;
}

bool captureThisForward(bool debuggerDue, int64_t globalStep, int64_t lastCapturedStep) {
  return debuggerDue && globalStep >= 0 && globalStep != lastCapturedStep;
}

LayerRecorder::LayerRecorder(observe::LayerChain chain, const torch::Tensor& input, const observe::Interest& interest,
                             ParamsOf paramsOf, BackwardTiming backwardTiming)
    : chain_(std::move(chain)),
      input_(input),
      paramsOf_(std::move(paramsOf)),
      tensors_(interest.layerTensors),
      times_(interest.times),
      chainTimes_(interest.times || interest.modelTimes),
      stage_(backwardTiming == BackwardTiming::kStage),
      timeBackward_(interest.times && backwardTiming != BackwardTiming::kOff && torch::GradMode::is_enabled()),
      timeChainBackward_(!timeBackward_ && interest.modelTimes && backwardTiming == BackwardTiming::kHooks &&
                         torch::GradMode::is_enabled()) {
  // Stages hook no accumulators: they are shared by the stage's microbatches in flight.
  if ((timeBackward_ && !stage_) || timeChainBackward_) removeAccumulatorHooks();
  if (timeBackward_ || tensors_) outputs_.reserve(chain_.paths.size());
  if (tensors_) observers().moduleInput(chain_.topName, input_);
  if (chainTimes_) topStartUs_ = nowUs();
}

void LayerRecorder::begin(size_t /*layer*/) {
  if (times_) layerStartUs_ = nowUs();
}

void LayerRecorder::end(size_t layer, const torch::Tensor* output) {
  TORCH_CHECK(layer < chain_.paths.size() && (outputs_.size() == layer || !(timeBackward_ || tensors_)),
              "LayerRecorder: layers must be recorded in order (got ", layer, ")");
  if (times_) observers().layerForward(chain_.paths[layer], observe::spanSince(layerStartUs_));
  if (tensors_) {
    // The input of child i is the output of child i - 1 (reported under both names, as
    // smdebug's forward pre-hooks and hooks do).
    const torch::Tensor* in = layer == 0 ? &input_ : (outputs_[layer - 1].defined() ? &outputs_[layer - 1] : nullptr);
    if (in != nullptr) observers().moduleInput(chain_.paths[layer], *in);
    if (output != nullptr) observers().moduleOutput(chain_.paths[layer], *output);
  }
  if (timeBackward_ || tensors_) outputs_.push_back(output ? *output : torch::Tensor());
}

void LayerRecorder::finish(const torch::Tensor& result) {
  if (chainTimes_) observers().chainForward(chain_, observe::spanSince(topStartUs_));
  if (tensors_) observers().moduleOutput(chain_.topName, result);
  if (timeBackward_ && outputs_.size() == chain_.paths.size()) {
    auto times = armBackward(chain_.topName, chain_.paths, input_, outputs_, paramsOf_, /*perLayer=*/true, stage_);
    if (stage_ && times) backwardDone_ = [times] { firstLayerGradientDone(*times); };
  }
  if (timeChainBackward_) {
    // The chain as one piece: from its output's gradient until every layer's parameters
    // have theirs.
    const size_t n = chain_.paths.size();
    armBackward(chain_.topName, {chain_.topName}, input_, {result},
                [this, n](size_t) {
                  std::vector<torch::Tensor> all;
                  for (size_t i = 0; i < n; ++i)
                    for (auto& p : paramsOf_(i)) all.push_back(p);
                  return all;
                },
                /*perLayer=*/false);
  }
}

torch::Tensor runLayers(const std::string& topName, std::vector<Layer>& layers, const torch::Tensor& input,
                        const observe::Interest& interest) {
  TORCH_CHECK(!layers.empty(), "runLayers: no layers for ", topName);
  observe::LayerChain chain;
  chain.topName = topName;
  for (const auto& l : layers) chain.paths.push_back(l.path);
  LayerRecorder recorder(std::move(chain), input, interest,
                         [&layers](size_t i) { return layers[i].module.ptr()->parameters(/*recurse=*/true); });
  torch::nn::AnyValue value(input);
  for (size_t i = 0; i < layers.size(); ++i) {
    recorder.begin(i);
    value = forwardChild(layers[i].path, layers[i].module, i == 0 ? torch::nn::AnyValue(input) : std::move(value),
                         interest);
    recorder.end(i, value.try_get<torch::Tensor>());
  }
  const torch::Tensor* result = value.try_get<torch::Tensor>();
  TORCH_CHECK(result != nullptr, "runLayers: the last layer of ", topName, " (", layers.back().path,
              ") did not return a tensor");
  recorder.finish(*result);
  return *result;
}

void offerModuleOutput(const torch::nn::Module& module, const torch::Tensor& output) {
  if (tCapturePaths == nullptr) return;
  const auto it = tCapturePaths->find(&module);
  if (it != tCapturePaths->end()) observers().moduleOutput(it->second, output);
}

torch::Tensor forward(torch::nn::Module& module, const std::function<torch::Tensor(const torch::Tensor&)>& forwardFn,
                      const torch::Tensor& input, bool forwardIsModulesOwn) {
  observe::Observers& obs = observers();
  if (obs.size() == 0) return forwardFn(input);  // the common case: nobody listening
  const observe::Interest interest = obs.interest(&module);
  if (!interest.any()) return forwardFn(input);
  const CapturePathsScope capturePaths(module, interest.layerTensors);
  const std::string topName = debugger::moduleClassName(module.name());
  // Layer by layer only when layers are wanted; model-level times alone (profiling outside
  // the detailed window) take the model as one piece.
  if (auto* sequential = dynamic_cast<torch::nn::SequentialImpl*>(&module);
      sequential != nullptr && !sequential->is_empty() && forwardIsModulesOwn &&
      (interest.layerTensors || interest.times)) {
    std::vector<Layer> layers = sequentialLayers(*sequential);
    if (!layers.empty()) return runLayers(topName, layers, input, interest);
  }
  // The model as one piece: its own input/output and forward/backward (backward from its
  // output's gradient until its parameters' gradients are all accumulated).
  if (interest.layerTensors) obs.moduleInput(topName, input);
  const bool chainTimes = interest.times || interest.modelTimes;
  const int64_t start = chainTimes ? nowUs() : -1;
  torch::Tensor out = forwardFn(input);
  if (chainTimes) {
    observe::LayerChain chain;
    chain.topName = topName;
    obs.chainForward(chain, observe::spanSince(start));
    if (torch::GradMode::is_enabled()) {
      removeAccumulatorHooks();
      armBackward(topName, {topName}, input, {out},
                  [&module](size_t) { return module.parameters(/*recurse=*/true); }, /*perLayer=*/false);
    }
  }
  if (interest.layerTensors) obs.moduleOutput(topName, out);
  return out;
}

}  // namespace strata::instrument
