// Builds the layers of a LayerList (strata/layer_list.h): one at a time to profile them,
// or the ones a rank holds, each with its own seed so its values do not depend on which
// rank builds it or what was built before.
#pragma once

#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/adapter/layers.h"
#include "strata/layer_list.h"

namespace strata::pipeline {

class ModelBuilder {
 public:
  // Throws ConfigError (every rank alike: no factory runs here) for an empty list or a tie
  // whose path names no layer of the list.
  ModelBuilder(const LayerList& list, uint64_t modelSeed);

  int numLayers() const { return static_cast<int>(layers_.size()); }
  const std::string& path(int layer) const { return layers_.at(static_cast<size_t>(layer)).path; }
  uint64_t modelSeed() const { return modelSeed_; }
  // The declared ties as tensors shared by layers (uses[0]: the value source); parameter
  // names are not checked here (the layers are not built).
  const std::vector<TiedTensor>& ties() const { return ties_; }

  // Layer `layer`, built right after seeding the default CPU generator with
  // initSeed(modelSeed, path); the generator's state is put back afterwards. A factory that
  // throws becomes a strata::Error naming the layer.
  torch::nn::AnyModule build(int layer) const;

  // The module tree of the built layers (empty entries skipped): a Sequential with the
  // list's entries, groups as nested Sequentials, so parameter paths are the list's.
  torch::nn::Sequential assemble(const std::vector<torch::nn::AnyModule>& built) const;

 private:
  torch::nn::Sequential assembleList(const LayerList& list, const std::vector<torch::nn::AnyModule>& built,
                                     size_t& next) const;
  std::pair<int, std::string> resolve(const std::string& parameterPath) const;

  LayerList list_;
  std::vector<LayerList::Layer> layers_;
  uint64_t modelSeed_;
  std::vector<TiedTensor> ties_;
};

// Makes the uses of every tie that this rank holds one tensor: the others' storage becomes
// the first held use's and their gradients flow into its accumulator, so autograd sums the
// uses exactly as for one shared tensor. Checks shapes and dtypes (ConfigError naming both
// paths). `layers` are the model's (not built ones empty). The returned handles (the
// accumulators) must live as long as the model.
std::vector<std::shared_ptr<void>> shareTiedTensors(const std::vector<Layer>& layers,
                                                    const std::vector<TiedTensor>& ties);

// The tensor of use `use` of a tie ((layer, name) in the built layer); ConfigError naming the
// path and the layer's parameters when the layer has no such parameter.
torch::Tensor tiedParameter(const std::vector<Layer>& layers, const std::pair<int, std::string>& use);

}  // namespace strata::pipeline
