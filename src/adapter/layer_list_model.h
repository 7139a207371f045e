// What DistributedModel needs to build a model from a LayerList (strata/layer_list.h).
#pragma once

#include <torch/nn/modules/container/sequential.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "pipeline/adapter/model_builder.h"
#include "strata/group.h"

namespace strata::adapter {

// World rank 0's default CPU generator seed, on every rank: the model seed of a LayerList
// (torch::manual_seed before building the model makes it reproducible). Collective.
uint64_t worldModelSeed(Group& world);

// Every layer built (one process, data parallel), tied uses made one tensor. A factory that
// throws on any rank throws on every rank. Collective over `world`.
struct WholeModel {
  torch::nn::Sequential root;
  std::vector<std::shared_ptr<void>> tieHandles;  // keep alive with the model
};
WholeModel buildWholeModel(const pipeline::ModelBuilder& builder, Group& world);

// Same storage, place, shape and dtype: the same values. The uses of a tied weight on one
// rank are distinct tensors over one storage, so this, not the tensor object, identifies it.
using TensorKey = std::tuple<const void*, std::vector<int64_t>, c10::ScalarType>;
TensorKey tensorKey(const torch::Tensor& t);

// The tensors without repeats: a tensor registered by two modules, or tied uses sharing one
// storage, count once (optimizers must see a tied tensor once, or they step it twice).
std::vector<torch::Tensor> uniqueTensors(const std::vector<torch::Tensor>& tensors);
std::vector<std::pair<std::string, torch::Tensor>> uniqueTensors(
    const std::vector<std::pair<std::string, torch::Tensor>>& named);

}  // namespace strata::adapter
