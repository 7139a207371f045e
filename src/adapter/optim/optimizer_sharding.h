// Sharded optimizer state (ZeRO stage 1; dataparallel.shard_optimizer_state, docs/collectives.md
// "Sharded optimizer state"). Internal to the adapter.
//
// Each data-parallel rank keeps the wrapped optimizer's state for its shard of the parameters
// only: the optimizer's param groups are rebuilt to hold just the parameters this rank owns
// (collectives/optimizer_partition.h: whole tensors, greedy by size), with every group's
// options kept. Gradients are still averaged by the gradient reducer's AllReduce (every rank
// holds every averaged gradient: stage 1), each rank steps its shard, and then every
// parameter is broadcast in place from its owner, so all ranks hold identical parameters.
// The owner runs the optimizer's own math on the same tensor an unsharded run steps, so the
// result is bitwise that of unsharded training.
//
// Threading: the training thread.
#pragma once

#include <torch/optim/optimizer.h>

#include <string>
#include <vector>

#include "adapter/ops/unique_tensors.h"
#include "strata/group.h"

namespace strata::adapter {

// "" or how the optimizer's param groups differ from `expected` (per group, the TensorImpl of
// each tensor it held when sharded); `held` names those tensors in the message.
std::string groupsChange(const torch::optim::Optimizer& optimizer, const std::vector<std::vector<const void*>>& expected,
                         const std::string& held);

class OptimizerSharding {
 public:
  // Not collective. `modelParameters`: this rank's parameters (DistributedModel::
  // local_parameters()). An optimizer parameter outside them is dropped from the optimizer
  // when `dropOthers` (a pipeline: other stages' parameters never get a gradient here), else
  // refused (throws strata::Error naming its group and shape). Drops the state of the
  // parameters other ranks own. LBFGS (one state over all parameters) is refused.
  OptimizerSharding(torch::optim::Optimizer& optimizer, Group& group, const std::vector<torch::Tensor>& modelParameters,
                    bool dropOthers);

  // Collective over the world: throws strata::Error on every rank, naming the rank and the
  // change, when any rank's optimizer param groups or model parameters differ from those
  // the state was sharded over.
  void checkUnchanged(const torch::optim::Optimizer& optimizer, const std::vector<torch::Tensor>& modelParameters) const;
  // Collective over the data-parallel group: every parameter from its owner, in place.
  void broadcastParameters();

  size_t numParameters() const { return params_.size(); }
  // Every parameter the optimizer held when sharded (group by group), its group and owner.
  const std::vector<torch::Tensor>& parameters() const { return params_; }
  size_t groupOf(size_t i) const { return groupOf_.at(i); }
  int ownerOf(size_t i) const { return owner_.at(i); }
  size_t numOwned() const;

 private:
  std::string firstChange(const torch::optim::Optimizer& optimizer,
                          const std::vector<torch::Tensor>& modelParameters) const;

  Group& group_;
  std::vector<torch::Tensor> params_;  // every parameter the optimizer held, group by group
  std::vector<int> owner_;             // data-parallel rank owning params_[i]
  std::vector<size_t> groupOf_;        // param group of params_[i]
  std::vector<std::vector<const void*>> ownedByGroup_;  // TensorImpl* this rank's groups hold
  std::vector<TensorKey> modelKeys_;   // the model's parameters when sharded
};

}  // namespace strata::adapter
