// The model-parallel half of DistributedModel: the pipeline engine (pipeline/adapter/), the
// data-parallel reduction of a stage's replicas, and what the user's step function sees on
// the last stage.
//
// Life cycle: built with the model (groups created, config checked on every rank); the
// plan is made on the first step (or the first evaluation forward); from then on a step
// runs this rank's program. Inside step(), on the last stage, the stage calls the user's step
// function once per microbatch through a LastStageCall (last_stage_call.h); while it runs,
// m(x) (forward) and m.backward(loss) (recordLoss) go to that call, and the stage runs the
// backward when the schedule says. Per-layer dropout seeding moves the default generator; its state is saved
// before a step and restored after it, so code outside step() sees no difference.
//
// Threading: one training thread.
#pragma once

#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "adapter/dp/gradient_reducer.h"
#include "config/config.h"
#include "pipeline/adapter/engine.h"
#include "pipeline/adapter/last_stage_call.h"
#include "pipeline/adapter/model_builder.h"
#include "strata/distributed_model.h"

namespace strata::adapter {

class PipelineModel {
 public:
  // Collective over the world. Throws ConfigError on every rank for a config that cannot
  // work with this model (before any collective). Broadcasts world rank 0's weights.
  PipelineModel(const torch::nn::Sequential& sequential, std::shared_ptr<torch::nn::Module> module,
                config::ModelParallelConfig mp, const DistributedModelOptions& options, bool checkModelsMatch);
  // A LayerList: plans at once on the first batch/microbatches rows of `exampleBatch` and
  // builds this rank's layers only (module() is their tree). Collective over the world;
  // throws on every rank for a bad config, a failing factory, a bad tie, no feasible plan.
  PipelineModel(std::shared_ptr<const pipeline::ModelBuilder> builder, const torch::Tensor& exampleBatch,
                config::ModelParallelConfig mp, const DistributedModelOptions& options);

  // The model this rank runs (a LayerList's: only its layers).
  std::shared_ptr<torch::nn::Module> module() const { return module_; }
  // The optimizer of this rank's parameters (null: none, or it was destroyed). Its state
  // per parameter prices the plan when it exists before the plan is made; after the plan a
  // different assumption is logged. After step 1 every rank's holdings are logged beside the
  // plan's prediction.
  void setOptimizer(torch::optim::Optimizer* optimizer);

  // The step function for one microbatch on the last stage: (x, y) -> its result; the
  // caller binds its DistributedModel.
  using MicrobatchFn = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>;
  // One training (or evaluation) step of this rank's program; `step` numbers it.
  StepOutput step(const torch::Tensor& data, const torch::Tensor& target, int64_t step, const MicrobatchFn& fn);

  // Plans on the first microbatch of `data` unless planned (collective over the world).
  void ensurePlanned(const torch::Tensor& data);
  // m(x): the last stage's forward inside the step function, else the whole pipeline
  // without autograd (evaluation; plans first when no step has).
  torch::Tensor forward(const torch::Tensor& input);
  // m.backward(loss) inside the step function: records the loss for the executor.
  void recordLoss(const torch::Tensor& loss);
  bool insideStep() const { return call_ != nullptr; }

  void finishGradientSync();
  void zeroGrad();

  const pipeline::Engine& engine() const { return *engine_; }
  bool planned() const { return engine_->planned(); }
  bool holdsLastStage() const { return engine_->ppRank() == engine_->ppSize() - 1; }
  // The data-parallel group of this stage's replicas (nullptr when there are none).
  Group* dataParallelGroup() const { return engine_->dataParallelGroup(); }
  GradientReducer* reducer() const { return reducer_.get(); }
  PipelineStats stats() const;

 private:
  void planOn(const torch::Tensor& sampleMicrobatch);
  void logStart() const;
  double plannedOptimizerStateFactor() const;
  pipeline::StepInputs stepInputs(const torch::Tensor& data, const torch::Tensor& target, int64_t step,
                                  const MicrobatchFn& fn);

  std::shared_ptr<torch::nn::Module> module_;
  std::unique_ptr<pipeline::Engine> engine_;
  DistributedModelOptions options_;
  std::unique_ptr<GradientReducer> reducer_;  // replicas of this rank's stages (hybrid)
  uint64_t seedBase_ = 0;     // world rank 0's generator seed: per-layer dropout seeds
  // The step function's call on the last stage while it runs (set by Scope), else null.
  pipeline::LastStageCall* call_ = nullptr;
  struct Scope {
    Scope(PipelineModel& m, pipeline::LastStageCall& call) : model(m) { model.call_ = &call; }
    ~Scope() { model.call_ = nullptr; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    PipelineModel& model;
  };
  pipeline::StepReport lastReport_;
  torch::optim::Optimizer* optimizer_ = nullptr;
  double optimizerStateFactor_ = 2;  // what the plan assumed
  int64_t heldBytes_ = -1;           // measured at the start of step 1 (after one optimizer step)
  int64_t stepsRun_ = 0;             // step() calls in this process
};

}  // namespace strata::adapter
