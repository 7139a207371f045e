#include "adapter/optim/optimizer_sharding.h"

#include <torch/optim/lbfgs.h>
#include <torch/types.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <set>

#include "adapter/ops/agreement.h"
#include "collectives/optimizer_partition.h"
#include "core/errors.h"
#include "core/logging.h"
#include "strata/runtime.h"
#include "strata/tensor_ops.h"

namespace strata::adapter {
namespace {

// libtorch's key of a parameter's entry in Optimizer::state().
std::string stateKey(const torch::Tensor& p) { return c10::guts::to_string(p.unsafeGetTensorImpl()); }

std::vector<TensorKey> keysOf(const std::vector<torch::Tensor>& tensors) {
  std::vector<TensorKey> keys;
  for (const auto& t : tensors) keys.push_back(tensorKey(t));
  return keys;
}

}  // namespace

OptimizerSharding::OptimizerSharding(torch::optim::Optimizer& optimizer, Group& group,
                                     const std::vector<torch::Tensor>& modelParameters, bool dropOthers)
    : group_(group), modelKeys_(keysOf(modelParameters)) {
  // LBFGS keeps one state over all its parameters (a history of flat directions): stepping a
  // shard of them is different math, not the same update on fewer tensors.
  STRATA_CHECK(dynamic_cast<const torch::optim::LBFGS*>(&optimizer) == nullptr,
               "dataparallel.shard_optimizer_state=true: LBFGS keeps one state over all parameters and cannot "
               "be sharded; set it to false");
  const std::set<TensorKey> inModel(modelKeys_.begin(), modelKeys_.end());
  std::vector<size_t> bytes;
  for (size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    std::vector<torch::Tensor> local;
    for (const auto& p : optimizer.param_groups()[g].params()) {
      if (inModel.count(tensorKey(p)) == 0) {
        STRATA_CHECK(dropOthers, "dataparallel.shard_optimizer_state: param group ", g, " holds a tensor of shape ",
                     p.sizes(), " that is not a parameter of the model; a sharded optimizer steps the model's "
                     "parameters only");
        optimizer.state().erase(stateKey(p));
        continue;
      }
      STRATA_CHECK(p.is_contiguous() && p.device().is_cpu(), "dataparallel.shard_optimizer_state: parameter of shape ",
                   p.sizes(), " in param group ", g, " must be a contiguous CPU tensor");
      local.push_back(p);
      params_.push_back(p);
      groupOf_.push_back(g);
      bytes.push_back(static_cast<size_t>(p.numel()) * p.element_size());
    }
    optimizer.param_groups()[g].params() = std::move(local);
  }
  owner_ = collectives::partitionParameters(bytes, group_.size());
  const int me = group_.rank();
  size_t index = 0;
  for (auto& paramGroup : optimizer.param_groups()) {
    std::vector<torch::Tensor> kept;
    std::vector<const void*> keptImpls;
    for (const auto& p : paramGroup.params()) {
      if (owner_[index++] == me) {
        kept.push_back(p);
        keptImpls.push_back(p.unsafeGetTensorImpl());
      } else {
        optimizer.state().erase(stateKey(p));  // another rank keeps it
      }
    }
    paramGroup.params() = std::move(kept);  // the group's options stay as they were
    ownedByGroup_.push_back(std::move(keptImpls));
  }
  STRATA_LOG(kInfo, kInit, "optimizer state sharded over ", group_.size(), " data-parallel rank(s): this rank owns ",
             numOwned(), " of ", params_.size(), " parameter tensor(s), ",
             collectives::bytesPerPart(bytes, owner_, group_.size())[static_cast<size_t>(me)], " of ",
             std::accumulate(bytes.begin(), bytes.end(), size_t{0}), " parameter bytes");
}

size_t OptimizerSharding::numOwned() const {
  return static_cast<size_t>(std::count(owner_.begin(), owner_.end(), group_.rank()));
}

std::string groupsChange(const torch::optim::Optimizer& optimizer, const std::vector<std::vector<const void*>>& expected,
                         const std::string& held) {
  const auto& groups = optimizer.param_groups();
  if (groups.size() != expected.size())
    return c10::str("the optimizer has ", groups.size(), " param group(s), ", expected.size(),
                    " when its state was sharded (a param group was added or removed)");
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& params = groups[g].params();
    bool same = params.size() == expected[g].size();
    for (size_t i = 0; same && i < params.size(); ++i) same = params[i].unsafeGetTensorImpl() == expected[g][i];
    if (!same)
      return c10::str("param group ", g, " holds ", params.size(), " tensor(s) of this rank's shard, ",
                      expected[g].size(), " ", held, " when the state was sharded (its parameters were changed)");
  }
  return "";
}

std::string OptimizerSharding::firstChange(const torch::optim::Optimizer& optimizer,
                                           const std::vector<torch::Tensor>& modelParameters) const {
  if (std::string change = groupsChange(optimizer, ownedByGroup_, "whole tensors"); !change.empty()) return change;
  if (modelParameters.size() != modelKeys_.size())
    return c10::str("the model has ", modelParameters.size(), " parameter(s), ", modelKeys_.size(),
                    " when the optimizer state was sharded");
  for (size_t i = 0; i < modelParameters.size(); ++i)
    if (tensorKey(modelParameters[i]) != modelKeys_[i])
      return c10::str("model parameter ", i, " (shape ", modelParameters[i].sizes(),
                      ") is not the tensor the optimizer state was sharded over");
  return "";
}

void OptimizerSharding::checkUnchanged(const torch::optim::Optimizer& optimizer,
                                       const std::vector<torch::Tensor>& modelParameters) const {
  const std::string change = firstChange(optimizer, modelParameters);
  // Agreed over the world (naming the first rank that saw a change), so every rank throws
  // instead of some waiting in the broadcasts.
  adapter::agreeOrThrow(change.empty(), change + " (build the DistributedOptimizer after the last change)",
                       "dataparallel.shard_optimizer_state=true: the parameter set changed after the optimizer "
                       "state was sharded:");
}

void OptimizerSharding::broadcastParameters() {
  if (group_.size() == 1) return;
  torch::NoGradGuard noGrad;
  std::vector<std::shared_ptr<Work>> pending;
  pending.reserve(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i];
    pending.push_back(group_.broadcastAsync(p.data_ptr(), static_cast<size_t>(p.numel()), toDType(p.scalar_type()),
                                            owner_[i]));
  }
  for (auto& work : pending) work->wait(group_.timeout());
}

}  // namespace strata::adapter
