// Per-layer profiling on a sample microbatch: the planner's LayerCost for every layer and
// every layer's output shape. A pipeline profiles in parts: each rank measures a range of
// layers (profileLayerRange, on the input its upstream neighbour computed with
// forwardLayers) and mergeProfiles joins the gathered parts (owner_profile.h).
//
// A range runs as a stage runs it: a forward through every layer of the range on the sample
// (the training microbatch's shape), then a backward through them in reverse, each layer fed
// the input gradient of the layer after it; each layer is timed within that run. (Timed
// alone, a small layer's weights stay in the caches from one run to the next, and a stage
// of several such layers measured 5-7 % faster than run in turn.) `warmup` untimed
// runs, then `samples` timed ones, and with splitBackward after each a split one (B then W,
// as zero_bubble runs it) timing W; the medians count (pipeline/layer_timing.h decides them:
// robust to a loaded machine). Bytes come from the tensors: parameters and buffers,
// gradients (parameters that require grad), optimizer state (optimizerStateFactor x
// gradients: 0 for plain SGD, 1 with momentum, 2 for Adam), the output activation (what
// crosses a cut) and the stash: the bytes the forward allocated and still holds when it
// returns (its output and what autograd saved for backward), counted by c10's per-thread
// memory reporting. With activation checkpointing a stage keeps only its input, so the
// stash is the output alone.
//
// Layers come from acquire(i), once each; the range's layers are alive together while it is
// profiled (a pipeline rank's provisional block, which it holds anyway). A layer's buffers,
// gradients and the default CPU generator are restored, so profiling a built model leaves
// no trace on training.
#pragma once

#include <torch/nn/modules/container/any.h>
#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "pipeline/layer_cost.h"
#include "pipeline/provisional_split.h"
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

// How one use of a tie looks in its built layer (gathered with a part, checked at the merge).
struct TieUse {
  int tie = 0;  // index into the ties
  int use = 0;  // index into the tie's uses
  std::vector<int64_t> sizes;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  bool requiresGrad = false;
  size_t numBytes = 0;
};

// What one rank measured: layers [range.begin, range.end), costs without the tie fields
// (tieGroup/tiedBytes need every layer: mergeProfiles sets them).
struct PartialProfile {
  LayerRange range;
  std::vector<LayerCost> costs;
  std::vector<TensorShape> shapes;  // every layer's output for the sample
  std::vector<TieUse> uses;         // the ties' uses held by these layers
};

// Profiles layers [range.begin, range.end) of the model, `input` entering layer range.begin
// (the sample microbatch for layer 0). Layer 0's input needs no gradient, later inputs do.
// Throws naming the layer when a layer fails or its output is not batch-major, ConfigError
// when a tie names a parameter the layer does not have.
PartialProfile profileLayerRange(const std::vector<std::string>& names,
                                 const std::function<torch::nn::AnyModule(int)>& acquire,
                                 const std::vector<TiedTensor>& ties, const torch::Tensor& input, LayerRange range,
                                 const ProfileOptions& options);

// The output of layers [range.begin, range.end) for `input`, without autograd; the layers'
// buffers and the default generator are put back (what the next range is profiled on).
// Throws like profileLayerRange.
torch::Tensor forwardLayers(const std::vector<std::string>& names,
                            const std::function<torch::nn::AnyModule(int)>& acquire, const torch::Tensor& input,
                            LayerRange range);

// The whole profile from parts that cover every layer once (any order). Checks every tie's
// uses against the first (ConfigError naming both) and sets tieGroup/tiedBytes. Throws
// strata::Error when the parts leave a gap or overlap.
LayerProfile mergeProfiles(std::vector<PartialProfile> parts, size_t numLayers, const std::vector<TiedTensor>& ties,
                           const ProfileOptions& options);

// JSON form of a part, for gathering (costs as in layer_cost.h).
std::string partialProfileToJson(const PartialProfile& part);
PartialProfile partialProfileFromJson(const std::string& text);

// All layers on one rank: mergeProfiles of one profileLayerRange over every layer.
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
