// What one pipeline rank computes: the forward and backward of its chunks (its parts of the
// model), one microbatch at a time, and the stash that carries a microbatch's tensors from its
// forward to its backward.
//
// The executor (executor.h) interprets this rank's program: for kForward, kBackward and
// kBackwardWeight it calls the stage; for the transfers it takes the boundary tensors from the
// stage (output, inputGradient) or hands received ones to it (setInput, setOutputGradient). A
// stage never sends, receives or decides the order; the executor never touches a module.
//
// Boundaries: what crosses a cut is a list of tensors (a chunk of layers has exactly one
// input and one output; a stage cut from a graph may carry several live values). Each list's
// shapes and dtypes are known before the step (inputShapes/outputShapes), so receives are
// posted into tensors of the right size.
//
// On the last global stage the user's step function runs once per microbatch, inside the
// stage's forward, through one LastStageCall (last_stage_call.h).
//
// Stage kinds: LayerStage (layer_stage.h: contiguous layers of a Sequential or a LayerList).
//
// Threading: one training thread.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "pipeline/adapter/layers.h"

namespace strata::pipeline {

class LastStageCall;

// One chunk (model part) on this rank: global stage chunk*p + rank, layers [begin, end).
struct ChunkRange {
  int globalStage = 0;
  int begin = 0;
  int end = 0;
};

// What the last global stage does with one microbatch: call the user's step function with
// the stage input and the target slice, through `call` (m(x) and m.backward(loss) inside the
// function reach the stage through it). Returns the function's result.
using LastStageFn =
    std::function<torch::Tensor(LastStageCall& call, const torch::Tensor& input, const torch::Tensor& target)>;

struct StepInputs {
  torch::Tensor data;    // the whole batch (every rank of the pipeline passes the same one)
  torch::Tensor target;
  int microbatches = 1;
  int64_t step = 0;
  std::optional<uint64_t> seedBase;      // set in training: per-layer RNG seeding
  std::vector<TensorShape> layerShapes;  // probed output shape of every layer
  LastStageFn lastStage;
  std::function<void()> reduceGradients;     // kReduceGradients
  std::function<void(int chunk, int microbatch)> beforeBackward;  // e.g. enable DP hooks
  std::function<void(int chunk, int microbatch)> afterBackward;   // e.g. hand on tied gradients
};

struct StepReport {
  std::vector<torch::Tensor> outputs;  // last global stage only: the step function's results
  double computeSeconds = 0;           // forward + backward on this rank
  double backwardSeconds = 0;          // of which backward (B and W when split)
  double weightGradientSeconds = 0;    // of which W (split backward only)
  double recvWaitSeconds = 0;          // blocked in receives
  double totalSeconds = 0;
  int peakInFlight = 0;                // chunk-microbatches stashed at once
  int64_t peakStashBytes = 0;          // their boundary tensors (inputs + outputs)
};

// Whether observers time this step: per layer and transfer (detailed), or only per stage
// (model level); decided once per step by the executor.
struct StepTiming {
  bool detailed = false;
  bool modelLevel = false;
};

using Boundary = std::vector<torch::Tensor>;
using BoundaryShapes = std::vector<TensorShape>;

class Stage {
 public:
  virtual ~Stage() = default;

  // A step begins: `inputs` and `report` live until endStep(). The stage adds its compute
  // times, stash peaks and (last stage) the step function's results to `report`.
  virtual void beginStep(const StepInputs& inputs, StepTiming timing, StepReport* report) = 0;
  // The step's program ended. Throws when a microbatch's stash was left without its
  // backward (an invalid program); with `failed`, drops what is left without throwing.
  virtual void endStep(bool failed) = 0;

  virtual int numChunks() const = 0;
  virtual int globalStage(int chunk) const = 0;
  // What chunk `chunk` receives from upstream (its input) and from downstream (the gradient
  // of its output), per sample (the batch dimension is the microbatch size).
  virtual BoundaryShapes inputShapes(int chunk) const = 0;
  virtual BoundaryShapes outputShapes(int chunk) const = 0;

  // kRecvActivation: the chunk's input for `microbatch` (not on global stage 0, which slices
  // the batch itself).
  virtual void setInput(int chunk, int microbatch, Boundary input) = 0;
  // kForward.
  virtual void forward(int chunk, int microbatch) = 0;
  // kSendActivation: the chunk's output, detached.
  virtual Boundary output(int chunk, int microbatch) = 0;
  // kRecvGradient: the gradient of the chunk's output.
  virtual void setOutputGradient(int chunk, int microbatch, Boundary gradient) = 0;
  // kBackward: the whole backward, or with a split backward (zero_bubble) its input half (B).
  virtual void backward(int chunk, int microbatch) = 0;
  // kBackwardWeight: the weight half (W) of a split backward.
  virtual void backwardWeight(int chunk, int microbatch) = 0;
  // kSendGradient: the gradient of the chunk's input (taken: the stash drops it).
  virtual Boundary takeInputGradient(int chunk, int microbatch) = 0;

  // The forward of a chunk for `microbatch` (seeded like the stage's own forwards): what m(x)
  // runs inside the user's step function on the last stage.
  virtual torch::Tensor forwardChunk(int chunk, int microbatch, const torch::Tensor& x) = 0;
};

}  // namespace strata::pipeline
