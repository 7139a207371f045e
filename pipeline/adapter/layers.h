// The layers of a pipelined model: a torch::nn::Sequential's children, in order. A stage is
// a contiguous range of them; the executor runs ranges, the partitioner cuts them.
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
  std::string name;  // the child's name in the Sequential ("0", "conv1", ...)
  mutable torch::nn::AnyModule module;  // AnyModule::forward is not const
};

std::vector<Layer> layersOf(const torch::nn::Sequential& model);

// splitmix64 over the four values: well mixed, identical on every platform.
uint64_t layerSeed(uint64_t base, int64_t step, int microbatch, int layer);

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

// Every layer's output shape for `sample` (eval mode, no autograd; the module's training
// flag is restored). Throws naming the layer when an output is not batch-major.
std::vector<TensorShape> probeShapes(const std::vector<Layer>& layers, torch::nn::Module& model,
                                     const torch::Tensor& sample);

// Groups of layers that share a parameter tensor (tied weights), as [first, last] ranges:
// a contiguous partition must keep each range on one stage. Ranges that overlap are merged.
std::vector<std::pair<int, int>> tiedLayerRanges(const std::vector<Layer>& layers);

// Parameters (requires_grad or not) and buffers of layers [begin, end), with their paths
// in the full model ("3.weight").
std::vector<std::pair<std::string, torch::Tensor>> namedParameters(const std::vector<Layer>& layers, int begin,
                                                                    int end);
std::vector<std::pair<std::string, torch::Tensor>> namedBuffers(const std::vector<Layer>& layers, int begin,
                                                                 int end);

}  // namespace strata::pipeline
