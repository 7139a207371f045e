// The one place where training steps are observed.
//
// DistributedModel, its gradient reducer, DistributedOptimizer and the pipeline executor
// report what a step does through this interface and nothing else; the profiler
// (profiler_observer.cpp: timeline slices) and the debugger (debugger_observer.cpp:
// tensors) are two implementations, registered with the process's Observers when the job
// config turns them on (observers.cpp). Training code never calls the profiler or the
// debugger directly.
//
// Times are microseconds on the observers' clock (Observers::nowUs(), the profiler's
// clock), taken only when some observer wants times (Observers::timing()): outside the
// profiler's window a step costs one pointer test per event site.
//
// Event order within a step (data parallel):
//   stepBegin, parameters, [forward: moduleTensors / layerForward... , modelForward],
//   [backward: layerBackward..., modelBackward], gradientSync, loss, stepEnd,
//   gradients, optimizerStep
// and per pipeline microbatch: stageForward (with its layerForward events inside),
// stageBackward, transfer (sends and receive waits), then sendsWaited.
//
// Threading: events come from the training thread, except layerBackward and
// modelBackward, which may come from the autograd engine's thread running that training
// thread's backward. Implementations must not throw (the Observers fan-out catches and
// logs, so one failing observer never fails training).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "strata/types.h"

namespace strata::observe {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// A half-open span of time [startUs, startUs + durUs).
struct Span {
  int64_t startUs = 0;
  int64_t durUs = 0;
};

// One gradient bucket's AllReduce: launched at launchUs, ran runUs on the FIFO
// communication thread.
struct BucketRun {
  size_t index = 0;
  size_t bytes = 0;
  int64_t launchUs = -1;
  int64_t runUs = 0;
};

// A pipeline chunk's forward or backward of one microbatch.
struct StageWork {
  int stage = 0;       // global stage
  int chunk = 0;       // local chunk index on this rank
  int microbatch = 0;
  int64_t step = 0;
  bool recomputed = false;  // backward of a checkpointed forward (the forward ran again)
  Span span;
  // zero_bubble's W (parameter gradients), reported apart from its B (the input gradient,
  // reported as the plain backward).
  bool weightGradients = false;
};

// A pipeline send (posting it) or receive (the time blocked waiting for it).
struct Transfer {
  enum class Kind { kSendActivation, kSendGradient, kRecvActivation, kRecvGradient };
  Kind kind = Kind::kSendActivation;
  int peer = 0;
  int stage = 0;
  int microbatch = 0;
  int64_t bytes = 0;
  Span span;
};
const char* transferName(Transfer::Kind kind);  // "send activation", "recv gradient", ...

// A model (or pipeline stage) run as a chain of layers: its name in slices and tensor names
// ("Sequential", "stage 1") and the layer paths ("0", "conv1", "blocks.3").
struct LayerChain {
  std::string topName;
  std::vector<std::string> paths;
  StageWork stage;      // pipeline stages: the chunk and microbatch (isStage)
  bool isStage = false;
};

// What observers want from the forward about to run.
struct Interest {
  bool layerTensors = false;  // module inputs/outputs (the debugger has a due step)
  bool times = false;         // per-layer forward/backward slices (the profiler's window is on)
  bool modelTimes = false;    // the model's own forward/backward slices (profiling is on)
  bool any() const { return layerTensors || times || modelTimes; }
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;

  // --- queries (cheap; the training thread asks before each forward) -----------------
  // Detailed timing: per-layer slices, communication, data loading (the profiler's
  // framework_profile window).
  virtual bool timing() const { return false; }
  // The model's own forward/backward slices, wanted at every step while profiling is on
  // (smdebug writes them outside the detailed window too).
  virtual bool modelTiming() const { return timing(); }
  // The observer's clock (µs, as in Span), or -1 when it has none.
  virtual int64_t nowUs() const { return -1; }
  // Whether the forward of `model` (any stable key: the module's address) should hand its
  // layers' tensors over. An observer that says yes for a step may say no to later forwards
  // of the same step (the first forward of a step is the one captured).
  virtual bool wantsLayerTensors(const void* /*model*/) { return false; }
  // Whether parameters() / gradients() would be used now (a debugger collection is due):
  // the training code skips gathering them otherwise.
  virtual bool wantsTensors() const { return false; }

  // --- a step -----------------------------------------------------------------------
  // `step`: the model's global step (steps of every mode count); `modeStep`: the step's
  // number within its mode (smdebug's mode_step; -1: the same as `step`).
  virtual void stepBegin(int64_t /*step*/, Mode /*mode*/, int64_t /*modeStep*/ = -1) {}
  virtual void stepEnd(int64_t /*step*/) {}
  // The parameters this step's forward uses (before it runs), named by their path in the
  // model, under the model's class name `topClass` ("Net").
  virtual void parameters(const std::string& /*topClass*/, const NamedTensors& /*params*/) {}
  // The step's loss (the mean over microbatches).
  virtual void loss(const torch::Tensor& /*loss*/) {}
  // Gradients as the optimizer will see them (after the AllReduce, before the update).
  virtual void gradients(const std::string& /*topClass*/, const NamedTensors& /*params*/) {}
  // The optimizer step that followed step `step` (it belongs to that step).
  virtual void optimizerStep(int64_t /*step*/, Span /*span*/) {}
  // The data loader asked for the next batch.
  virtual void batchRequested() {}

  // --- forward and backward -----------------------------------------------------------
  // A module's input or output (path: a layer's path, or the top name for the model).
  virtual void moduleInput(const std::string& /*path*/, const torch::Tensor& /*input*/) {}
  virtual void moduleOutput(const std::string& /*path*/, const torch::Tensor& /*output*/) {}
  virtual void layerForward(const std::string& /*path*/, Span /*span*/) {}
  // The whole chain's forward (after its layers'). For pipeline stages chain.stage says
  // which chunk and microbatch.
  virtual void chainForward(const LayerChain& /*chain*/, Span /*span*/) {}
  virtual void layerBackward(const std::string& /*path*/, Span /*span*/) {}
  virtual void chainBackward(const std::string& /*topName*/, Span /*span*/) {}

  // --- data parallel -------------------------------------------------------------------
  // One backward's gradient reduction: the training thread waited `wait`; `buckets` ran on
  // the communication thread.
  virtual void gradientSync(Span /*wait*/, const std::vector<BucketRun>& /*buckets*/) {}

  // --- pipeline ------------------------------------------------------------------------
  virtual void stageBackward(const StageWork& /*work*/) {}
  virtual void transfer(const Transfer& /*transfer*/) {}
  virtual void sendsWaited(Span /*span*/, int64_t /*sends*/) {}
};

}  // namespace strata::observe
