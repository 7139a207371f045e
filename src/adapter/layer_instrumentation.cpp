#include "adapter/layer_instrumentation.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/modules/container/sequential.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "debugger/naming.h"
#include "debugger/torch_hook.h"
#include "profiler/layer_timeline.h"
#include "profiler/session.h"

namespace strata::instrument {
namespace {

using profiler::Track;
namespace phases = profiler::phases;

int64_t nowUs() {
  profiler::Session* s = profiler::current();
  return s ? s->nowUs() : -1;
}

// When one backward's hooks fired; shared by the hooks of one forward.
struct BackwardTimes {
  std::string topName;
  std::vector<std::string> paths;
  std::mutex mu;                      // hooks may run on an autograd worker thread
  std::vector<int64_t> outputGradUs;  // per layer, -1 until its output's gradient arrives
  int firstPending = 0;               // first differentiable layer's gradients still to come
  int64_t firstDoneUs = -1;
  bool perLayer = true;
  bool recorded = false;
};

void recordBackward(BackwardTimes& t) {
  // Called with t.mu held, once.
  t.recorded = true;
  profiler::Session* s = profiler::current();
  if (s == nullptr || !s->timelineActive()) return;
  const profiler::BackwardSlices slices = profiler::backwardSlices(t.outputGradUs, t.firstDoneUs);
  if (slices.whole)
    s->recordSlice(t.topName, phases::kBackward, Track::kCompute, slices.whole->startUs, slices.whole->durUs);
  if (!t.perLayer) return;
  for (const auto& l : slices.layers)
    s->recordSlice(t.paths[l.layer], phases::kBackwardSubmodule, Track::kCompute, l.interval.startUs,
                   l.interval.durUs);
}

void firstLayerGradientDone(BackwardTimes& t) {
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.recorded || t.firstPending <= 0) return;
  t.firstDoneUs = nowUs();
  if (--t.firstPending == 0) recordBackward(t);
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

// Arms the backward timing of one forward: `outputs[i]` is layer i's output; `paramsOf(i)`
// the parameters of layer i. With `perLayer` false only the model's Backward slice is
// recorded (the model ran as one piece).
void armBackward(const std::string& topName, const std::vector<std::string>& paths, const torch::Tensor& input,
                 const std::vector<torch::Tensor>& outputs,
                 const std::function<std::vector<torch::Tensor>(size_t)>& paramsOf, bool perLayer) {
  auto times = std::make_shared<BackwardTimes>();
  times->topName = topName;
  times->paths = paths;
  times->perLayer = perLayer;
  times->outputGradUs.assign(outputs.size(), -1);
  size_t first = outputs.size();
  for (size_t i = 0; i < outputs.size() && first == outputs.size(); ++i)
    if (outputs[i].defined() && outputs[i].requires_grad()) first = i;
  if (first == outputs.size()) return;  // nothing differentiable
  for (size_t i = first; i < outputs.size(); ++i) {
    if (!outputs[i].defined() || !outputs[i].requires_grad()) continue;
    torch::Tensor out = outputs[i];
    out.register_hook([times, i](const torch::Tensor&) {
      std::lock_guard<std::mutex> lock(times->mu);
      if (times->outputGradUs[i] < 0) times->outputGradUs[i] = nowUs();
    });
  }
  if (first == 0 && input.defined() && input.requires_grad()) {
    // The batch itself wants a gradient: the first layer is done when it arrives.
    times->firstPending = 1;
    torch::Tensor in = input;
    in.register_hook([times](const torch::Tensor&) { firstLayerGradientDone(*times); });
    return;
  }
  std::vector<torch::Tensor> params;
  for (const auto& p : paramsOf(first))
    if (p.requires_grad()) params.push_back(p);
  times->firstPending = static_cast<int>(params.size());
  for (const auto& p : params) {
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

void saveTensors(debugger::TorchHook* hook, const std::string& path, const torch::Tensor* in,
                 const torch::Tensor* out) {
  if (hook == nullptr) return;
  if (in != nullptr) hook->saveModuleInputs(path, {*in});
  if (out != nullptr) hook->saveModuleOutputs(path, {*out});
}

// The models' capture states, by module address (process-wide; the debugger's global step
// is process-wide too).
std::mutex gStatesMu;
std::unordered_map<const torch::nn::Module*, CaptureState> gStates;

}  // namespace

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

Needs currentNeeds(CaptureState& state) {
  Needs needs;
  if (profiler::Session* s = profiler::current()) needs.timeline = s->timelineActive();
  if (debugger::TorchHook* hook = debugger::activeHook()) {
    const bool due = hook->writes() && hook->core().anythingDue();
    const int64_t step = due ? hook->core().globalStep() : -1;
    if (captureThisForward(due, step, state.lastCapturedStep)) {
      needs.capture = true;
      state.lastCapturedStep = step;
    }
  }
  return needs;
}

LayerRecorder::LayerRecorder(std::string topName, std::vector<std::string> paths, const torch::Tensor& input,
                             const Needs& needs, ParamsOf paramsOf, std::vector<profiler::Arg> topArgs)
    : topName_(std::move(topName)),
      paths_(std::move(paths)),
      input_(input),
      paramsOf_(std::move(paramsOf)),
      topArgs_(std::move(topArgs)),
      hook_(needs.capture ? debugger::activeHook() : nullptr),
      prof_(needs.timeline ? profiler::current() : nullptr),
      timeBackward_(prof_ != nullptr && needs.layerBackward && torch::GradMode::is_enabled()) {
  if (timeBackward_) removeAccumulatorHooks();
  if (timeBackward_ || hook_) outputs_.reserve(paths_.size());
  saveTensors(hook_, topName_, &input_, nullptr);
  if (prof_) topStartUs_ = prof_->nowUs();
}

void LayerRecorder::begin(size_t layer) {
  if (prof_) layerStartUs_ = prof_->nowUs();
  (void)layer;
}

void LayerRecorder::end(size_t layer, const torch::Tensor* output) {
  TORCH_CHECK(layer < paths_.size() && (outputs_.size() == layer || !(timeBackward_ || hook_)),
              "LayerRecorder: layers must be recorded in order (got ", layer, ")");
  if (prof_)
    prof_->recordSlice(paths_[layer], phases::kForwardSubmodule, Track::kCompute, layerStartUs_,
                       prof_->nowUs() - layerStartUs_);
  if (hook_) {
    // The input of child i is the output of child i - 1 (saved under both names, as
    // smdebug's forward pre-hooks and hooks do).
    const torch::Tensor* in = layer == 0 ? &input_ : (outputs_[layer - 1].defined() ? &outputs_[layer - 1] : nullptr);
    saveTensors(hook_, paths_[layer], in, output);
  }
  if (timeBackward_ || hook_) outputs_.push_back(output ? *output : torch::Tensor());
}

void LayerRecorder::finish(const torch::Tensor& result) {
  if (prof_)
    prof_->recordSlice(topName_, phases::kForward, Track::kCompute, topStartUs_, prof_->nowUs() - topStartUs_,
                       std::move(topArgs_));
  saveTensors(hook_, topName_, nullptr, &result);
  if (timeBackward_ && outputs_.size() == paths_.size())
    armBackward(topName_, paths_, input_, outputs_, paramsOf_, /*perLayer=*/true);
}

torch::Tensor runLayers(const std::string& topName, std::vector<Layer>& layers, const torch::Tensor& input,
                        const Needs& needs) {
  TORCH_CHECK(!layers.empty(), "runLayers: no layers for ", topName);
  std::vector<std::string> paths;
  for (const auto& l : layers) paths.push_back(l.path);
  LayerRecorder recorder(topName, std::move(paths), input, needs,
                         [&layers](size_t i) { return layers[i].module.ptr()->parameters(/*recurse=*/true); });
  torch::nn::AnyValue value(input);
  for (size_t i = 0; i < layers.size(); ++i) {
    recorder.begin(i);
    torch::nn::AnyValue next = i == 0 ? layers[i].module.any_forward(input) : layers[i].module.any_forward(std::move(value));
    value = std::move(next);
    recorder.end(i, value.try_get<torch::Tensor>());
  }
  const torch::Tensor* result = value.try_get<torch::Tensor>();
  TORCH_CHECK(result != nullptr, "runLayers: the last layer of ", topName, " (", layers.back().path,
              ") did not return a tensor");
  recorder.finish(*result);
  return *result;
}

torch::Tensor forward(torch::nn::Module& module, const std::function<torch::Tensor(const torch::Tensor&)>& forwardFn,
                      const torch::Tensor& input, bool forwardIsModulesOwn) {
  // The common case first: nobody listening, no lock.
  profiler::Session* prof = profiler::current();
  debugger::TorchHook* hook = debugger::activeHook();
  const bool timeline = prof != nullptr && prof->timelineActive();
  if (!timeline && (hook == nullptr || !hook->writes() || !hook->core().anythingDue())) return forwardFn(input);
  Needs needs;
  {
    std::lock_guard<std::mutex> lock(gStatesMu);
    needs = currentNeeds(gStates[&module]);
  }
  if (!needs.any()) return forwardFn(input);
  const std::string topName = debugger::moduleClassName(module.name());
  if (auto* sequential = dynamic_cast<torch::nn::SequentialImpl*>(&module);
      sequential != nullptr && !sequential->is_empty() && forwardIsModulesOwn) {
    std::vector<Layer> layers = sequentialLayers(*sequential);
    if (!layers.empty()) return runLayers(topName, layers, input, needs);
  }
  // The model as one piece: its own input/output and Forward/Backward slices (backward
  // from its output's gradient until its parameters' gradients are all accumulated).
  debugger::TorchHook* capture = needs.capture ? hook : nullptr;
  saveTensors(capture, topName, &input, nullptr);
  const int64_t start = needs.timeline ? prof->nowUs() : 0;
  torch::Tensor out = forwardFn(input);
  if (needs.timeline) {
    prof->recordSlice(topName, phases::kForward, Track::kCompute, start, prof->nowUs() - start);
    if (torch::GradMode::is_enabled()) {
      removeAccumulatorHooks();
      armBackward(topName, {topName}, input, {out},
                  [&module](size_t) { return module.parameters(/*recurse=*/true); }, /*perLayer=*/false);
    }
  }
  saveTensors(capture, topName, nullptr, &out);
  return out;
}

int64_t timelineNowUs() noexcept {
  profiler::Session* s = profiler::current();
  return s != nullptr && s->timelineActive() ? s->nowUs() : -1;
}

GradientSyncTimer::GradientSyncTimer() noexcept : waitStartUs_(timelineNowUs()) {}

void GradientSyncTimer::add(int64_t launchUs, std::chrono::nanoseconds runTime, size_t bytes) noexcept {
  const size_t index = next_++;
  if (waitStartUs_ < 0 || launchUs < 0) return;
  try {
    buckets_.push_back({launchUs, std::chrono::duration_cast<std::chrono::microseconds>(runTime).count(), bytes, index});
  } catch (...) {  // out of memory: the timeline loses a slice, training goes on
  }
}

GradientSyncTimer::~GradientSyncTimer() {
  if (waitStartUs_ < 0) return;
  profiler::Session* s = profiler::current();
  if (s == nullptr || !s->timelineActive()) return;
  try {
    const int64_t end = s->nowUs();
    s->recordSlice(phases::kAllReduceWait, phases::kAllReduceWait, Track::kCompute, waitStartUs_, end - waitStartUs_,
                   {{"buckets", static_cast<int64_t>(next_)}});
    std::vector<profiler::CommRun> runs;
    for (const Bucket& b : buckets_) runs.push_back({b.launchUs, b.runUs});
    const auto intervals = profiler::fifoRunIntervals(runs, end);
    for (size_t i = 0; i < intervals.size(); ++i)
      s->recordSlice("bucket " + std::to_string(buckets_[i].index), phases::kAllReduce, Track::kCommunication,
                     intervals[i].startUs, intervals[i].durUs,
                     {{"bucket", static_cast<int64_t>(buckets_[i].index)},
                      {"bytes", static_cast<int64_t>(buckets_[i].bytes)}});
  } catch (...) {  // the profiler's own failures never fail the job
  }
}

void batchRequested() noexcept {
  if (profiler::Session* s = profiler::current()) s->batchRequested();
}

}  // namespace strata::instrument
