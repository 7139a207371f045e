// DistributedOptimizer: any torch::optim optimizer, stepped after the gradient reduction,
// with optionally sharded state (optim/optimizer_sharding.h) and host-shared parameters
// (optim/host_shared_state.h). It reaches the model's strategy (parallelism.h) for what
// differs between data parallelism and a pipeline.
#include <cmath>

#include "adapter/observe/observers.h"
#include "adapter/ops/agreement.h"
#include "adapter/optim/host_shared_state.h"
#include "adapter/optim/optimizer_sharding.h"
#include "adapter/optim/optimizer_state.h"
#include "adapter/parallelism.h"
#include "core/errors.h"
#include "core/logging.h"
#include "debugger/naming.h"
#include "runtime/runtime_internal.h"
#include "strata/distributed_model.h"
#include "strata/runtime.h"

namespace strata {

DistributedOptimizer::DistributedOptimizer(std::unique_ptr<torch::optim::Optimizer> optimizer, DistributedModel& model,
                                           DistributedOptimizerOptions options)
    : optimizer_(std::move(optimizer)), model_(model) {
  shardState_ = options.shardOptimizerState < 0 ? runtime::jobConfig().dataParallel.shardOptimizerState
                                                : options.shardOptimizerState != 0;
  hostSharedWanted_ = options.hostSharedParameters < 0 ? runtime::jobConfig().dataParallel.hostSharedParameters
                                                       : options.hostSharedParameters != 0;
  STRATA_CHECK_WITH(ConfigError, !hostSharedWanted_ || shardState_,
                    "dataparallel.host_shared_parameters=true needs dataparallel.shard_optimizer_state=true");
  // A pipeline plans (and checks after its first step) with this optimizer's real state.
  model_.parallelism().setOptimizer(optimizer_.get());
  shardIfReady();  // before any checkpoint is loaded: it then restores only this rank's shard
}

DistributedOptimizer::~DistributedOptimizer() { model_.parallelism().setOptimizer(nullptr); }

void DistributedOptimizer::shardIfReady() {
  // A pipeline knows this rank's parameters once its first step has cut the model.
  if (!shardState_ || sharding_ || !model_.parallelism().partitioned()) return;
  sharding_ = std::make_unique<adapter::OptimizerSharding>(*optimizer_, model_.group(), model_.local_parameters(),
                                                          /*dropOthers=*/model_.model_parallel());
}

void DistributedOptimizer::shareHostIfReady() {
  if (!hostSharedWanted_ || hostShared_ || hostSharedDecided_ || !sharding_) return;
  adapter::GradientReducer* reducer = model_.parallelism().hostShareableReducer();
  std::string why = !reducer ? "model parallelism (host sharing is for data parallelism)"
                             : adapter::HostSharedState::whyNot(*optimizer_, *reducer, *sharding_, model_.group(),
                                                                model_.module()->parameters(/*recurse=*/true));
  if (why == "the gradient buckets are not final yet") return;  // decided at a later step
  // Every rank decides alike (the inputs are the same everywhere); agreed anyway, since
  // building the host state is collective.
  int64_t able = why.empty() ? 1 : 0;
  model_.group().allreduce(&able, &able, 1, DType::kInt64, ReduceOp::kMin);
  hostSharedDecided_ = true;
  if (able == 0) {
    STRATA_LOG(kWarn, kInit, "dataparallel.host_shared_parameters: not used (",
               why.empty() ? std::string("another rank cannot use it") : why,
               "); the optimizer state stays sharded by whole tensors");
    return;
  }
  hostShared_ = std::make_unique<adapter::HostSharedState>(*optimizer_, *reducer, *sharding_, model_.group(),
                                                           model_.module()->parameters(/*recurse=*/true));
}

double DistributedOptimizer::clip_grad_norm(double maxNorm) {
  model_.finish_gradient_sync();
  if (hostShared_) return hostShared_->clipGradNorm(maxNorm);
  torch::NoGradGuard noGrad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : model_.local_parameters())
    if (p.grad().defined()) grads.push_back(p.grad());
  double sumSq = 0;
  for (const auto& g : grads) sumSq += g.to(torch::kFloat64).pow(2).sum().item<double>();
  sumSq = model_.parallelism().sumOverModel(sumSq);
  const double norm = std::sqrt(sumSq);
  const double coef = maxNorm / (norm + 1e-6);
  if (coef < 1)
    for (auto& g : grads) g.mul_(coef);
  return norm;
}

torch::optim::Optimizer& DistributedOptimizer::state_optimizer() {
  if (!hostShared_) return *optimizer_;
  if (!stateView_ || stateViewSteps_ != stepsTaken_) {
    stateView_ = hostShared_->wholeView();
    stateViewSteps_ = stepsTaken_;
  }
  return *stateView_;
}

void DistributedOptimizer::state_loaded() {
  if (!hostShared_ || !stateView_) return;
  hostShared_->commitLoaded(*stateView_);
  stateView_.reset();
}

size_t DistributedOptimizer::state_bytes() const { return adapter::optimizerStateBytes(*optimizer_); }

void DistributedOptimizer::zero_grad() { model_.zero_grad(); }

void DistributedOptimizer::checkParameterSet() {
  if (hostShared_) {
    const std::string change = hostShared_->firstChange(*optimizer_, model_.local_parameters());
    adapter::agreeOrThrow(change.empty(), change + " (build the DistributedOptimizer after the last change)",
                          "dataparallel.shard_optimizer_state=true: the parameter set changed after the optimizer "
                          "state was sharded:");
  } else {
    sharding_->checkUnchanged(*optimizer_, model_.local_parameters());  // collective: all ranks throw together
  }
}

void DistributedOptimizer::step() {
  model_.finish_gradient_sync();
  if (shardState_) {
    shardIfReady();
    shareHostIfReady();
    checkParameterSet();
  }
  observe::Observers& obs = observe::observers();
  // Gradients as the optimizer sees them: after the AllReduce, before the update (this
  // rank's stages only, in a pipeline).
  if (obs.wantsTensors()) {
    observe::NamedTensors local;  // buffers have no gradient: skipped
    for (const auto& item : model_.local_state_dict()) local.emplace_back(item.key(), item.value());
    obs.gradients(debugger::moduleClassName(model_.module()->name()), local);
  }
  // Belongs to the model's step that just ended (model.step() closed it).
  const int64_t startUs = obs.clockUs();
  if (hostShared_) hostShared_->beforeStep();
  optimizer_->step();
  ++stepsTaken_;
  if (hostShared_) {
    hostShared_->afterStep();  // host barrier: every rank's shard is stepped
  } else if (sharding_) {
    sharding_->broadcastParameters();  // every rank's parameters from their owners
  }
  obs.optimizerStep(model_.lastStepGlobal(), observe::spanSince(startUs));
}

}  // namespace strata
