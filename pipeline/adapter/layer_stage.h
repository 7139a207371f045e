// A stage made of contiguous layers (layers.h): this rank's chunks of a Sequential or a
// LayerList. Each chunk's input and output is one tensor.
//
// Stashes: a forward keeps its input (a leaf that requires grad on non-first stages) and
// output until the microbatch's backward, which frees them. With activation checkpointing a
// chunk (except on the last global stage) runs its forward without autograd and keeps only
// the input; backward recomputes the forward with the same RNG seeds, then differentiates it.
//
// Split backward (zero_bubble): the forward cuts the chunk's autograd graph at every layer
// boundary (each layer's input is a fresh leaf detached from the previous layer's output) and
// keeps every layer's input and output. backward (B) then walks the layers from the last to
// the first with torch::autograd::grad(output, input, retain_graph), which runs only the
// input-gradient half of each layer's backward, so the stage input's gradient can go upstream
// at once. backwardWeight (W) later runs one torch::autograd::backward over every layer's
// output with the gradients B found, restricted to the chunk's parameters: only the
// weight-gradient half runs, nothing is computed twice, and the gradients accumulate into
// .grad exactly as a full backward would (bitwise: the same kernels on the same tensors; W's
// run in microbatch order). The stash lives until W. The data-parallel and tied-gradient
// callbacks (StepInputs::before/afterBackward) wrap W, where parameter gradients are made. A
// layer must not modify its input in place (its input is a leaf).
//
// On the last global stage, forward runs the user's step function through a LastStageCall;
// its backward scales the recorded loss by 1/microbatches, the one place the loss is scaled
// (gradients are the mean over microbatches, as one process running (loss / m).backward()).
//
// Observing (src/adapter/observe/observers.h): while an observer times in detail (the
// profiler's framework_profile window), each chunk forward is reported as a chain "stage <s>"
// with its layers (chainForward, layerForward), each chunk backward as a stageBackward with
// its layers' backward inside (layerBackward, from hooks on the layers' outputs; with a split
// backward the layers' B, while W stays one "stage <s> W" slice). At model level only, one
// slice per chunk forward and backward.
//
// Threading: one training thread.
#pragma once

#include <torch/types.h>

#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "adapter/observe/step_observer.h"
#include "pipeline/adapter/layers.h"
#include "pipeline/adapter/stage.h"

namespace strata::pipeline {

struct LayerStageSetup {
  const std::vector<Layer>* layers = nullptr;
  std::vector<ChunkRange> chunks;  // index = local chunk
  int numStages = 1;               // p * v
  bool activationCheckpointing = false;
  bool splitBackward = false;  // zero_bubble: backward is B, backwardWeight is W
};

class LayerStage final : public Stage {
 public:
  explicit LayerStage(LayerStageSetup setup);

  void beginStep(const StepInputs& inputs, StepTiming timing, StepReport* report) override;
  void endStep(bool failed) override;
  int numChunks() const override { return static_cast<int>(setup_.chunks.size()); }
  int globalStage(int chunk) const override { return chunkAt(chunk).globalStage; }
  BoundaryShapes inputShapes(int chunk) const override;
  BoundaryShapes outputShapes(int chunk) const override;
  void setInput(int chunk, int microbatch, Boundary input) override;
  void forward(int chunk, int microbatch) override;
  Boundary output(int chunk, int microbatch) override;
  void setOutputGradient(int chunk, int microbatch, Boundary gradient) override;
  void backward(int chunk, int microbatch) override;
  void backwardWeight(int chunk, int microbatch) override;
  Boundary takeInputGradient(int chunk, int microbatch) override;
  torch::Tensor forwardChunk(int chunk, int microbatch, const torch::Tensor& x) override;

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

  const ChunkRange& chunkAt(int chunk) const { return setup_.chunks.at(static_cast<size_t>(chunk)); }
  Stash& stashOf(int chunk, int microbatch, const char* what);
  void runLastStage(int chunk, int microbatch, Stash& st);
  void backwardInput(int chunk, int microbatch, Stash& st);  // split: B
  Stash* cutsFor(int chunk, int microbatch);  // where a split forward records its layers
  torch::Tensor slice(const torch::Tensor& t, int microbatch) const;
  bool isLastStage(int chunk) const { return globalStage(chunk) == setup_.numStages - 1; }
  void trackStash();
  void addCompute(double seconds, bool backward, bool weight = false);
  static void endLayerBackward(Stash& st);
  torch::Tensor recordedForward(int chunk, int microbatch, const torch::Tensor& x, const SeedContext* seed,
                                Stash* cuts);
  // The stage's chain (name, layers, stage/chunk/microbatch/step) for its slices.
  observe::LayerChain stageChain(int chunk, int microbatch) const;
  // When a stage's work starts for its slice: -1 when no observer records it at this step.
  int64_t stageStartUs() const;
  void reportBackward(int chunk, int microbatch, int64_t startUs, bool checkpointed, bool weight) const;

  LayerStageSetup setup_;
  const StepInputs* in_ = nullptr;
  StepTiming timing_;
  StepReport* report_ = nullptr;
  std::map<std::pair<int, int>, Stash> stash_;  // (chunk, microbatch)
};

}  // namespace strata::pipeline
