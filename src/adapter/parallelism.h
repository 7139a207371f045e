// How a DistributedModel trains, chosen once when it is built (chooseParallelism):
//   * data parallelism (data_parallel.cpp): every rank holds the whole model; gradients are
//     averaged by the bucketed reducer (dp/gradient_reducer.h) while backward runs;
//   * a pipeline (pipeline_parallel.cpp): the model is cut into stages over the ranks of a
//     pipeline, optionally replicated for data parallelism (pipeline/adapter/pipeline_model.h).
// DistributedModel and DistributedOptimizer call only through this interface; a new way to
// train (a traced graph cut into stages) is one more implementation and one more case in the
// choice, nothing else.
//
// Threading: one training thread drives a model and its strategy.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "adapter/dp/gradient_reducer.h"
#include "adapter/observe/step_observer.h"
#include "config/config.h"
#include "strata/distributed_model.h"

namespace strata::adapter {

// The user's step function for one microbatch, bound to its DistributedModel: (x, y) -> result.
using MicrobatchFn = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>;
using ForwardFn = std::function<torch::Tensor(const torch::Tensor&)>;

class Parallelism {
 public:
  virtual ~Parallelism() = default;

  // The module the user sees (a LayerList pipeline: the tree of this rank's layers only).
  virtual std::shared_ptr<torch::nn::Module> module() const = 0;
  // The data-parallel group: the world's ranks (or the group given), or the replicas of this
  // rank's stages (the world when there are none).
  virtual Group& group() const = 0;
  virtual bool modelParallel() const = 0;
  // Whether this rank's parameters are final: always for data parallelism, after the plan
  // for a pipeline.
  virtual bool partitioned() const = 0;
  virtual int ppRank() const = 0;
  virtual int ppSize() const = 0;
  virtual int dpRank() const = 0;
  virtual int dpSize() const = 0;

  // Before a step is observed: a pipeline plans on the first batch (so the step already
  // reports what this rank holds). Collective on the first call.
  virtual void prepareStep(const torch::Tensor& data) = 0;
  // One training step: `fn` once per microbatch (once in data parallelism), gradients
  // synchronised before it returns. `step` numbers it (the pipeline's per-step seeds).
  virtual std::vector<torch::Tensor> step(const torch::Tensor& data, const torch::Tensor& target, int64_t step,
                                          const MicrobatchFn& fn) = 0;
  // m(x): inside the step function, or outside it (evaluation).
  virtual torch::Tensor forward(const torch::Tensor& input) = 0;
  // m.backward(loss) inside the step function.
  virtual void backward(const torch::Tensor& loss) = 0;
  virtual void zeroGrad() = 0;
  // The reducer of this rank's gradients; null when nothing is reduced (one pipeline).
  virtual GradientReducer* reducer() const = 0;
  // The reducer of a data-parallel model whose gradients may live in host-shared memory;
  // null otherwise (DistributedOptimizer's host_shared_parameters).
  virtual GradientReducer* hostShareableReducer() const { return nullptr; }
  // Whether the step's loss is computed on this rank (a pipeline's last stage).
  virtual bool holdsLoss() const = 0;
  // This rank's parameters and buffers with their paths in the model.
  virtual observe::NamedTensors localParameters() const = 0;
  virtual observe::NamedTensors localBuffers() const = 0;
  virtual PipelineStats pipelineStats() const { return {}; }
  // The optimizer stepping this rank's parameters (null when it goes away).
  virtual void setOptimizer(torch::optim::Optimizer* /*optimizer*/) {}
  // A per-rank sum (squared gradient norms) over the whole model: data-parallel replicas hold
  // the same averages, so the value itself; a pipeline adds its stages'. Collective.
  virtual double sumOverModel(double value) const = 0;
};

// What the model's constructor was given.
struct ModelSource {
  std::shared_ptr<torch::nn::Module> module;
  ForwardFn forward;
  // `forward` is module->forward: the per-layer instrumentation may run a Sequential's
  // children one by one in its place.
  bool forwardIsModulesOwn = false;
  const torch::nn::Sequential* sequential = nullptr;  // the model is a Sequential
  std::vector<std::shared_ptr<void>> tieHandles;       // a LayerList's tied tensors (one process)
};

// The job config's defaults filled into `options` (bucket cap, gradient dtype).
DistributedModelOptions resolvedOptions(DistributedModelOptions options);

// Chooses and builds the strategy (collective over the world, or the group given). Throws
// ConfigError on every rank for a model parallelism config the model cannot take.
std::unique_ptr<Parallelism> chooseParallelism(ModelSource source, const DistributedModelOptions& options);
std::unique_ptr<Parallelism> chooseParallelism(const LayerList& layers, const torch::Tensor& exampleBatch,
                                               const DistributedModelOptions& options);

// The strategies (data_parallel.cpp, pipeline_parallel.cpp).
std::unique_ptr<Parallelism> makeDataParallel(ModelSource source, const DistributedModelOptions& options);
std::unique_ptr<Parallelism> makePipelineParallel(ModelSource source, const config::ModelParallelConfig& mp,
                                                  const DistributedModelOptions& options);
std::unique_ptr<Parallelism> makeLayerListPipeline(const LayerList& layers, const torch::Tensor& exampleBatch,
                                                   const config::ModelParallelConfig& mp,
                                                   const DistributedModelOptions& options);

}  // namespace strata::adapter
