// Per-layer data of a libtorch model for the debugger and the profiler.
//
// libtorch's C++ modules have no forward hooks, so when someone needs per-layer data at
// this step (the debugger has a due step, or the profiler's framework timeline is on), a
// Sequential's children are run one by one, exactly as Sequential::forward chains them,
// and around each child we
//   * save "<path>_input_0" and "<path>_output_0" through the debugger hook (once per global
//     step: the first forward of a step is the one captured, so gradient-accumulation
//     micro-batches and evaluation passes between steps do not write a name twice);
//   * record a "Forward-SubModuleInternal" slice named after the child, inside a "Forward"
//     slice named after the model's class, on the compute track;
//   * register tensor hooks on the child's output (and, for the first differentiable child,
//     gradient-accumulator hooks on its parameters) that time its backward as a
//     "Backward-SubModuleInternal" slice inside a "Backward(post-forward)" slice
//     (profiler/layer_timeline.h has the timing rules).
// At any other step the model's own forward runs untouched after two atomic loads and, with
// a debugger hook writing on this rank, its "anything due" flag (one uncontended mutex):
// ~1 ns per forward without a hook, ~15 ns with one (bench/overhead_bench, fast_path_ns).
//
// Names: a child's path is its name in the Sequential ("0", "1" ... or the names given to
// a named Sequential: "conv1", "relu1"), so smdebug's default regexes ("outputs",
// ".*relu_output") match as they do in Python. The model itself is "<Class>_input_0" /
// "<Class>_output_0" (debugger/naming.h). Only direct children are instrumented; a model
// that is not a Sequential, or a DistributedModel given its own forward function, gets the
// model-level input/output and Forward/Backward slices only (its forward may not be the
// chain of its children).
//
// Threading: the training thread (and the autograd engine running backward for it).
#pragma once

#include <torch/nn/modules/container/any.h>
#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "profiler/timeline_event.h"

namespace torch::nn {
class Module;
class SequentialImpl;
}  // namespace torch::nn

namespace strata::debugger {
class TorchHook;
}
namespace strata::profiler {
class Session;
}

namespace strata::instrument {

// One child to run: its module path and the module (AnyModule: any forward signature, as
// in a Sequential).
struct Layer {
  std::string path;
  torch::nn::AnyModule module;
};

// The children of a Sequential in order with their names; empty if they cannot be paired.
std::vector<Layer> sequentialLayers(torch::nn::SequentialImpl& sequential);

// What a forward has to do at the current step.
struct Needs {
  bool capture = false;   // save module inputs/outputs through the debugger hook
  bool timeline = false;  // record forward/backward slices
  // Time each layer's backward with tensor and gradient-accumulator hooks. Off for pipeline
  // stages: the executor times each stage's backward itself, and the microbatches in flight
  // share their parameters' accumulators (one microbatch's hooks would fire in another's).
  bool layerBackward = true;
  bool any() const { return capture || timeline; }
};

// Per model (or pipeline stage): the global step whose tensors were already captured.
struct CaptureState {
  int64_t lastCapturedStep = -1;
};

// Pure: capture at the first forward of each global step while the debugger has a due
// collection.
bool captureThisForward(bool debuggerDue, int64_t globalStep, int64_t lastCapturedStep);

// What the current step needs, from the active debugger hook and profiler session. Updates
// `state` when it decides to capture.
Needs currentNeeds(CaptureState& state);

// Runs `layers` in order on `input` (Sequential::forward semantics: each child gets the
// previous child's output) doing what `needs` asks. `topName` names the model (or stage)
// in slices and tensor names ("Sequential", "Net"). The pipeline executor calls this per
// stage. The result must be a tensor.
torch::Tensor runLayers(const std::string& topName, std::vector<Layer>& layers, const torch::Tensor& input,
                        const Needs& needs);

// The same per-layer recording for an executor that runs the layers itself (the pipeline's
// stages, which seed each layer's RNG before its forward):
//   LayerRecorder rec(stageName, paths, input, currentNeeds(state), paramsOf);
//   for (size_t i = 0; i < n; ++i) { rec.begin(i); y = layer_i(y); rec.end(i, &y); }
//   rec.finish(y);
// Layers must be recorded in order, each exactly once; finish() after the last one arms the
// backward timing. Does nothing beyond what `needs` asks.
class LayerRecorder {
 public:
  using ParamsOf = std::function<std::vector<torch::Tensor>(size_t layer)>;
  // `topArgs`: the args of the top Forward slice (a pipeline stage's microbatch).
  LayerRecorder(std::string topName, std::vector<std::string> paths, const torch::Tensor& input, const Needs& needs,
                ParamsOf paramsOf, std::vector<profiler::Arg> topArgs = {});
  void begin(size_t layer);
  // `output`: the layer's output, or nullptr when it is not a tensor.
  void end(size_t layer, const torch::Tensor* output);
  void finish(const torch::Tensor& result);

 private:
  std::string topName_;
  std::vector<std::string> paths_;
  torch::Tensor input_;
  ParamsOf paramsOf_;
  std::vector<profiler::Arg> topArgs_;
  debugger::TorchHook* hook_;
  profiler::Session* prof_;
  bool timeBackward_;
  int64_t topStartUs_ = 0;
  int64_t layerStartUs_ = 0;
  std::vector<torch::Tensor> outputs_;
};

// DistributedModel::forward: `forwardFn` when nobody needs per-layer data, otherwise the
// instrumented forward described above. `forwardIsModulesOwn`: `forwardFn` is the module's
// own forward (DistributedModel's module-holder constructors say so), which running a
// Sequential's children in order reproduces; otherwise the model is recorded as one piece.
torch::Tensor forward(torch::nn::Module& module, const std::function<torch::Tensor(const torch::Tensor&)>& forwardFn,
                      const torch::Tensor& input, bool forwardIsModulesOwn = false);

// The profiler clock while the framework timeline is on, else -1 (e.g. when a gradient
// bucket is launched).
int64_t timelineNowUs() noexcept;

// The gradient AllReduce of one backward, for the timeline (DistributedModel's finish):
// construct it before waiting for the buckets, add() each bucket as its wait returns; the
// destructor records an "AllReduceWait" slice (the exposed wait) on the compute track and
// one "AllReduce" slice per bucket on the communication track, placed where the bucket ran
// on the FIFO communication thread (profiler/layer_timeline.h). Does nothing while the
// timeline is off. Never throws.
class GradientSyncTimer {
 public:
  GradientSyncTimer() noexcept;
  ~GradientSyncTimer();
  GradientSyncTimer(const GradientSyncTimer&) = delete;
  GradientSyncTimer& operator=(const GradientSyncTimer&) = delete;
  // launchUs: timelineNowUs() when the bucket was launched (-1: not timed, skipped).
  void add(int64_t launchUs, std::chrono::nanoseconds runTime, size_t bytes) noexcept;

 private:
  struct Bucket {
    int64_t launchUs;
    int64_t runUs;
    size_t bytes;
    size_t index;
  };
  int64_t waitStartUs_;
  size_t next_ = 0;
  std::vector<Bucket> buckets_;
};

// Data loading: DistributedSampler::next calls it; the current profiler session turns the
// time until the next step begins into a DataLoaderIter slice (profiler/session.h).
void batchRequested() noexcept;

}  // namespace strata::instrument
