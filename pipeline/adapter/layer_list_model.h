// What DistributedModel needs to build a model from a LayerList (strata/layer_list.h).
#pragma once

#include <torch/nn/modules/container/sequential.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "adapter/ops/unique_tensors.h"
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

}  // namespace strata::adapter
