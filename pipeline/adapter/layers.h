// The layers of a pipelined model, in order: a torch::nn::Sequential's children (a child
// that is itself a Sequential or a ModuleList of Sequentials, like a transformer's blocks,
// contributes its items as layers "blocks.0", "blocks.1", ...), or the layers of a LayerList.
// A stage is a contiguous range of them; the executor runs ranges, the partitioner cuts them.
//
// Dropout RNG policy (results must not depend on the number of stages or the schedule):
// in training, the default CPU generator is re-seeded before every layer's forward with
// layerSeed(base, step, microbatch, layer). A layer's random numbers are then a function of
// (step, microbatch, layer) only, whichever rank runs it and in whatever order, and a
// recomputed forward (activation checkpointing) draws the same masks. `base` is world rank
// 0's generator seed at construction. The generator's state is saved before a step and
// restored after it, so code outside step() sees no difference.
#pragma once

#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace strata::pipeline {

struct Layer {
  std::string name;  // its path in the model ("0", "conv1", "blocks.3")
  mutable torch::nn::AnyModule module;  // AnyModule::forward is not const; empty: not built here
};

// The layers of `model`: its children, with the items of a nested container (a Sequential,
// or a ModuleList whose items are Sequentials) as layers of their own. Throws ConfigError
// naming the child and saying what to change for a child that cannot be called with one
// tensor (a ModuleDict, a ModuleList of other modules).
std::vector<Layer> layersOf(const torch::nn::Sequential& model);

// Why `model` (not a Sequential) cannot be cut into stages, and what to change: its children
// with their types, specific advice for a ModuleList or ModuleDict among them.
std::string notASequentialMessage(const torch::nn::Module& model);

// A tensor several layers use (tied weights): every use as (layer, parameter name inside
// the layer); uses[0] gives the value (a declared tie's first parameter), the others follow
// by layer.
struct TiedTensor {
  std::vector<std::pair<int, std::string>> uses;
  std::vector<int> layers() const;  // distinct, ascending
};

// Parameters shared by several layers of a built model (one tensor registered in each).
std::vector<TiedTensor> sharedParameters(const std::vector<Layer>& layers);

// splitmix64 over the four values: well mixed, identical on every platform.
uint64_t layerSeed(uint64_t base, int64_t step, int microbatch, int layer);

// The seed a layer's initial weights are drawn with: splitmix64 of the model seed and a
// 64-bit FNV-1a hash of the layer's path. Depends on nothing else (not on the partition).
uint64_t initSeed(uint64_t modelSeed, const std::string& layerPath);

// Seeding of one microbatch's forward (absent: no re-seeding, e.g. in evaluation).
struct SeedContext {
  uint64_t base = 0;
  int64_t step = 0;
  int microbatch = 0;
};

// Runs layers [begin, end) on x; seeds each layer when `seed` is given.
torch::Tensor runLayers(const std::vector<Layer>& layers, int begin, int end, torch::Tensor x,
                        const SeedContext* seed);

// A tensor's shape and dtype with the batch dimension left out (it is the microbatch size).
struct TensorShape {
  std::vector<int64_t> sizes;  // including dim 0, as probed
  c10::ScalarType dtype = c10::ScalarType::Float;
  torch::Tensor empty(int64_t batch) const;  // a fresh tensor with dim 0 = batch
  int64_t bytesPerSample() const;
};

// Throws naming the layer when `output` (of layer `index`, `name`, for a batch of `batch`)
// is not batch-major.
void checkBatchMajor(const std::string& name, size_t index, const torch::Tensor& output, int64_t batch);

// Parameters (requires_grad or not) and buffers of layers [begin, end), with their paths
// in the full model ("3.weight").
std::vector<std::pair<std::string, torch::Tensor>> namedParameters(const std::vector<Layer>& layers, int begin,
                                                                    int end);
std::vector<std::pair<std::string, torch::Tensor>> namedBuffers(const std::vector<Layer>& layers, int begin,
                                                                 int end);

}  // namespace strata::pipeline
