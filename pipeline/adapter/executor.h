// The pipeline executor: carries out one rank's program (pipeline/program.h) for one
// training step. It decides nothing: the order of forwards, backwards, sends and receives
// is the program's, proven deadlock-free by the simulator. It only
//   * runs its chunks' layers forward and backward per microbatch,
//   * sends activations and gradients with isend (eager: the buffer is kept alive until
//     the step ends, when every send is waited for) and receives them with irecv + wait
//     (the group's collective timeout bounds every wait),
//   * on the last global stage hands each microbatch to the user's step function and
//     scales its loss by 1/m exactly once (gradients are averaged over microbatches),
//   * calls back for the data-parallel gradient reduction (kReduceGradients).
//
// Stashes: a forward keeps its input (a leaf that requires grad on non-first stages) and
// output until the microbatch's backward, which frees them. With activation checkpointing a
// stage (except the last global one) runs its forward without autograd and keeps only the
// input; backward recomputes the forward with the same RNG seeds, then differentiates it.
//
// Split backward (zero_bubble, setup.splitBackward): the forward cuts the chunk's autograd
// graph at every layer boundary (each layer's input is a fresh leaf detached from the
// previous layer's output) and keeps every layer's input and output. kBackward (B) then walks
// the layers from the last to the first with torch::autograd::grad(output, input,
// retain_graph), which runs only the input-gradient half of each layer's backward, and the
// stage input's gradient goes upstream at once. kBackwardWeight (W) later runs one
// torch::autograd::backward over every layer's output with the gradients B found, restricted
// to the chunk's parameters: only the weight-gradient half runs, nothing is computed twice,
// and the gradients accumulate into .grad exactly as a full backward would (bitwise: the same
// kernels on the same tensors; W's run in microbatch order). The stash lives until W. The
// data-parallel and tied-gradient callbacks (before/afterBackward) wrap W, where parameter
// gradients are made. A layer must not modify its input in place (its input is a leaf).
//
// Observing (src/adapter/observers.h): while an observer times (the profiler's
// framework_profile window), the executor reports per chunk forward a chain "stage <s>" with
// its layers (chainForward, layerForward), per chunk backward a stageBackward with its
// layers' backward inside (layerBackward, from hooks on the layers' outputs; with a split
// backward the layers' B, while W stays one "stage <s> W" slice), every send
// and every receive (the time blocked in it) as a transfer, and the final wait for the
// step's sends. The profiler turns them into "Forward"/"Forward-SubModuleInternal"/
// "Backward(post-forward)"/"Backward-SubModuleInternal" slices on the compute track and "Pipeline" slices on the
// pipeline track. Otherwise: one test per instruction.
//
// Threading: one training thread.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "adapter/step_observer.h"
#include "pipeline/program.h"
#include "pipeline/adapter/layers.h"
#include "strata/group.h"

namespace strata::pipeline {

// One chunk (model part) on this rank: global stage chunk*p + rank, layers [begin, end).
struct ChunkRange {
  int globalStage = 0;
  int begin = 0;
  int end = 0;
};

struct ExecutorSetup {
  const std::vector<Layer>* layers = nullptr;
  std::vector<ChunkRange> chunks;  // index = local chunk
  int rank = 0;                    // pipeline rank
  int partitions = 1;              // p
  int numStages = 1;               // p * v
  Group* pipelineGroup = nullptr;  // ranks of this pipeline, index = pipeline rank
  bool activationCheckpointing = false;
  bool splitBackward = false;  // zero_bubble: kBackward is B, kBackwardWeight is W
};

// What the last global stage does with one microbatch: call the user's step function with
// the stage input and the target slice. Returns the function's result and the loss it
// passed to model.backward() (undefined if it did not).
using LastStageFn =
    std::function<std::pair<torch::Tensor, torch::Tensor>(int microbatch, const torch::Tensor& input,
                                                          const torch::Tensor& target)>;

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

class Executor {
 public:
  explicit Executor(ExecutorSetup setup);

  // Carries out `program` (this rank's) for one step. Throws strata::Error naming the
  // instruction (and the whole program) when it fails.
  StepReport run(const Program& program, const StepInputs& inputs);

  // The forward of a chunk inside the user's step function (last stage): seeded like the
  // executor's own forwards.
  torch::Tensor forwardChunk(int chunk, int microbatch, const torch::Tensor& x);

 private:
  struct Stash {
    torch::Tensor input;     // received activation (leaf) or the data slice
    torch::Tensor output;    // the chunk's output (with its autograd graph unless checkpointed)
    torch::Tensor loss;      // last stage: what model.backward() was given
    torch::Tensor gradOut;   // received gradient w.r.t. output
    torch::Tensor gradIn;    // gradient w.r.t. input, to send
    bool checkpointed = false;
    // Split backward: per layer of the chunk its input (a leaf cut from the previous output;
    // the first is `input`), its output (the last is the root: `output`, or the scaled loss
    // on the last stage) and, after B, the gradient w.r.t. that output.
    std::vector<torch::Tensor> layerInputs, layerOutputs, layerOutputGrads;
    bool inputGradientDone = false;  // B ran (its gradient may still wait to be sent)
    // While timed: ends the per-layer backward slices of its forward (the first layer's end).
    std::function<void()> layerBackwardDone;
  };

  void execute(const Instruction& in);
  void forward(const Instruction& in);
  void backward(const Instruction& in);
  void backwardInput(const Instruction& in, Stash& st);   // split: B
  void backwardWeight(const Instruction& in);             // split: W
  Stash* cutsFor(int chunk, int microbatch);  // where a split forward records its layers
  void send(const Instruction& in, const torch::Tensor& tensor);
  torch::Tensor recv(const Instruction& in, const TensorShape& shape);
  const TensorShape& inputShape(int globalStage) const;
  torch::Tensor slice(const torch::Tensor& t, int microbatch) const;
  bool isLastStage(int chunk) const;
  void trackStash();
  static void endLayerBackward(Stash& st);
  void finishSends();
  torch::Tensor recordedForward(int chunk, int microbatch, const torch::Tensor& x, const SeedContext* seed,
                                Stash* cuts);
  void reportTransfer(const Instruction& in, int64_t startUs, int64_t bytes);
  // The stage's chain (name, layers, stage/chunk/microbatch/step) for its slices.
  observe::LayerChain stageChain(int chunk, int microbatch) const;
  // When a stage's work starts for its slice: -1 when no observer records it at this step.
  int64_t stageStartUs() const;

  ExecutorSetup setup_;
  bool timing_ = false;  // an observer times this step in detail (per layer, transfers)
  // An observer records model-level slices at this step (the stage's forward and backward,
  // at every step while profiling is on, as smdebug's model-level events).
  bool modelTiming_ = false;
  const StepInputs* in_ = nullptr;
  StepReport report_;
  std::map<std::pair<int, int>, Stash> stash_;  // (chunk, microbatch)
  struct PendingSend {
    std::shared_ptr<Work> work;
    torch::Tensor buffer;
  };
  std::vector<PendingSend> sends_;
  std::map<uint64_t, torch::Tensor> local_;  // sends to this same rank (p == 1, virtual stages)
};

}  // namespace strata::pipeline
