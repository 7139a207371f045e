// Per-layer profiling on a sample microbatch: the planner's LayerCost for every layer and
// every layer's output shape, one layer at a time.
//
// Layer i runs on layer i-1's (detached) output, at the shape of the sample (the training
// microbatch): `warmup` untimed runs, then `samples` timed forward + backward runs, and with
// splitBackward after each a split one (B then W, as zero_bubble runs it) timing W; the
// medians count (pipeline/layer_timing.h decides them: robust to a loaded machine). Bytes come
// from the tensors: parameters and buffers, gradients (parameters that require grad),
// optimizer state (optimizerStateFactor x gradients: 0 for plain SGD, 1 with momentum, 2
// for Adam), the output activation (what crosses a cut) and the stash: the bytes the
// forward allocated and still holds when it returns (its output and what autograd saved
// for backward), counted by c10's per-thread memory reporting. With activation
// checkpointing a stage keeps only its input, so the stash is the output alone.
//
// Layers come from acquire(i), which may build the layer for the occasion; the profile
// drops its reference to layer i before acquiring layer i+1, so a LayerList is never held
// at once. A layer's buffers, gradients and the default CPU generator are restored, so
// profiling a built model leaves no trace on training.
#pragma once

#include <torch/nn/modules/container/any.h>
#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "pipeline/layer_cost.h"
#include "pipeline/adapter/layers.h"

namespace strata::pipeline {

struct ProfileOptions {
  int warmup = 2;                    // at least 1 (the run that measures the stash)
  int samples = 7;                   // 0: bytes and shapes only (no timing)
  bool splitBackward = true;         // also time W (LayerCost::weightGradientSeconds)
  double optimizerStateFactor = 2;   // optimizer state bytes per gradient byte
  bool activationCheckpointing = false;
};

struct LayerProfile {
  std::vector<LayerCost> costs;
  std::vector<TensorShape> shapes;  // every layer's output for the sample
};

// names: the layers' paths; ties: tensors shared by layers (every use's shape and dtype is
// checked against the first's: ConfigError naming both; the costs get tieGroup/tiedBytes).
// Throws naming the layer when a layer fails or its output is not batch-major.
LayerProfile profileLayers(const std::vector<std::string>& names,
                           const std::function<torch::nn::AnyModule(int)>& acquire,
                           const std::vector<TiedTensor>& ties, const torch::Tensor& sampleMicrobatch,
                           const ProfileOptions& options);

// JSON form for broadcasting a profile (costs as in layer_cost.h, shapes as
// [dtype, sizes...] lists).
std::string profileToJson(const LayerProfile& profile);
LayerProfile profileFromJson(const std::string& text);

}  // namespace strata::pipeline
