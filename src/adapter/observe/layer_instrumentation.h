// Per-layer events of a libtorch model for the step observers (adapter/observe/observers.h).
//
// libtorch's C++ modules have no forward hooks, so when an observer wants per-layer data at
// this step (the debugger has a due step, or the profiler's framework timeline is on), a
// Sequential's children are run one by one, exactly as Sequential::forward chains them,
// and around each child we report
//   * its input and output (moduleInput / moduleOutput: "<path>_input_0", "<path>_output_0"),
//     when an observer wants layer tensors (the first forward of a global step);
//   * its forward time (layerForward) inside the chain's (chainForward);
//   * its backward time (layerBackward) inside the chain's (chainBackward), from tensor
//     hooks on the child's output and, for the first differentiable child, gradient-
//     accumulator hooks on its parameters (profiler/layer_timeline.h has the timing rules).
// At any other step the model's own forward runs untouched after one look at the observers.
//
// Names: a child's path is its name in the Sequential ("0", "1" ... or the names given to
// a named Sequential: "conv1", "relu1"), so smdebug's default regexes ("outputs",
// ".*relu_output") match as they do in Python. A child that is itself a plain Sequential
// (strata::NestedSequential) is run child by child too, its children reported under their
// module paths ("block.0.relu", as smdebug names nested modules), at any depth. The model
// itself is "<Class>_input_0" / "<Class>_output_0" (debugger/naming.h). A model that is not
// a Sequential, a child with its own forward (a custom module), or a DistributedModel given
// its own forward function is reported as one piece (its forward may not be the chain of
// its children).
//
// Timing: per-layer slices only inside the profiler's detailed window (Interest::times);
// the model's own Forward/Backward slices at every step while profiling is on
// (Interest::modelTimes), which costs no per-layer run.
//
// Threading: the training thread (and the autograd engine running backward for it).
#pragma once

#include <torch/nn/modules/container/any.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "adapter/observe/step_observer.h"

namespace torch::nn {
class Module;
class SequentialImpl;
}  // namespace torch::nn

namespace strata::instrument {

// One child to run: its module path and the module (AnyModule: any forward signature, as
// in a Sequential).
struct Layer {
  std::string path;
  torch::nn::AnyModule module;
};

// The children of a Sequential in order with their names; empty if they cannot be paired.
std::vector<Layer> sequentialLayers(torch::nn::SequentialImpl& sequential);

// Pure: capture at the first forward of each global step while the debugger has a due
// collection.
bool captureThisForward(bool debuggerDue, int64_t globalStep, int64_t lastCapturedStep);

// Runs one child of a chain at `path` on `input`: its own forward, or, when it is a plain
// nested Sequential (torch::nn::Sequential, strata::NestedSequential) and per-layer data is
// wanted, its children one by one, each reported as "<path>.<child>" (recursively: smdebug's
// "layer1.0.relu"), the child itself being reported by the caller.
torch::nn::AnyValue forwardChild(const std::string& path, torch::nn::AnyModule& module, torch::nn::AnyValue input,
                                 const observe::Interest& interest);

// Runs `layers` in order on `input` (Sequential::forward semantics: each child gets the
// previous child's output) reporting what `interest` asks. `topName` names the model
// ("Sequential", "Net"). The result must be a tensor.
torch::Tensor runLayers(const std::string& topName, std::vector<Layer>& layers, const torch::Tensor& input,
                        const observe::Interest& interest);

// The same per-layer reporting for an executor that runs the layers itself (the pipeline's
// stages, which seed each layer's RNG before its forward):
//   LayerRecorder rec(chain, input, interest, paramsOf);
//   for (size_t i = 0; i < n; ++i) { rec.begin(i); y = layer_i(y); rec.end(i, &y); }
//   rec.finish(y);
// Layers must be recorded in order, each exactly once; finish() after the last one arms the
// backward timing. Does nothing beyond what `interest` asks.
//
// Backward timing: kHooks ends the first layer's backward at its input's gradient or its
// parameters' last accumulation (hooks on the accumulators, removed at the next recorded
// forward of the thread). Pipeline stages (kStage) cannot use those: their microbatches in
// flight share the accumulators and the next forward comes before this backward. They hook
// only the layers' outputs and end the first layer when their backward call returns: call
// backwardDone() (taken after finish()) then; the stage reports its whole backward itself.
enum class BackwardTiming { kHooks, kStage, kOff };

class LayerRecorder {
 public:
  using ParamsOf = std::function<std::vector<torch::Tensor>(size_t layer)>;
  LayerRecorder(observe::LayerChain chain, const torch::Tensor& input, const observe::Interest& interest,
                ParamsOf paramsOf, BackwardTiming backwardTiming = BackwardTiming::kHooks);
  void begin(size_t layer);
  // `output`: the layer's output, or nullptr when it is not a tensor.
  void end(size_t layer, const torch::Tensor* output);
  void finish(const torch::Tensor& result);
  // kStage, after finish(): ends the per-layer backward slices of this forward when called
  // (once its backward call returned); empty when nothing is timed.
  std::function<void()> backwardDone() const { return backwardDone_; }

 private:
  observe::LayerChain chain_;
  torch::Tensor input_;
  ParamsOf paramsOf_;
  bool tensors_;
  bool times_;       // per layer
  bool chainTimes_;  // the chain's own forward (per layer or model-level timing)
  bool stage_;       // BackwardTiming::kStage
  bool timeBackward_;
  bool timeChainBackward_;  // the chain's backward as one piece (model-level timing only)
  std::function<void()> backwardDone_;
  int64_t topStartUs_ = -1;
  int64_t layerStartUs_ = -1;
  std::vector<torch::Tensor> outputs_;
};

// strata::debugger::module_output: reports `output` as the output of `module` under its path
// in the model whose forward is being captured on this thread (instrument::forward with
// layer tensors wanted); does nothing otherwise.
void offerModuleOutput(const torch::nn::Module& module, const torch::Tensor& output);

// DistributedModel::forward: `forwardFn` when no observer wants per-layer data, otherwise
// the instrumented forward described above. `forwardIsModulesOwn`: `forwardFn` is the
// module's own forward (DistributedModel's module-holder constructors say so), which
// running a Sequential's children in order reproduces; otherwise the model is reported as
// one piece.
torch::Tensor forward(torch::nn::Module& module, const std::function<torch::Tensor(const torch::Tensor&)>& forwardFn,
                      const torch::Tensor& input, bool forwardIsModulesOwn = false);

}  // namespace strata::instrument
