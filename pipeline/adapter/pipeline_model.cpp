#include "pipeline/adapter/pipeline_model.h"

#include <ATen/CPUGeneratorImpl.h>

#include "adapter/ops/unique_tensors.h"
#include "adapter/ops/model_signature.h"
#include "adapter/optim/optimizer_state.h"
#include "pipeline/adapter/pipeline_memory.h"
#include "core/errors.h"
#include "core/logging.h"
#include "pipeline/adapter/rng_state_guard.h"
#include "strata/runtime.h"
#include "strata/tensor_ops.h"

namespace strata::adapter {
namespace {

void broadcastModule(torch::nn::Module& module, Group& group) {
  torch::NoGradGuard noGrad;
  for (const auto& p : module.parameters(/*recurse=*/true)) {
    torch::Tensor t = p.detach();
    broadcast(t, 0, &group);
  }
  for (auto& b : module.buffers(/*recurse=*/true)) broadcast(b, 0, &group);
}

}  // namespace

PipelineModel::PipelineModel(const torch::nn::Sequential& sequential, std::shared_ptr<torch::nn::Module> module,
                             config::ModelParallelConfig mp, const DistributedModelOptions& options,
                             bool checkModelsMatch)
    : module_(std::move(module)), options_(options) {
  // Ranks given different settings would build different programs and wait on each other.
  detail::checkModelParallelConfigsMatch(world(), detail::describeModelParallel(mp));
  // Checked before any collective, so a bad config fails on every rank alike.
  engine_ = std::make_unique<pipeline::Engine>(pipeline::layersOf(sequential), module_, std::move(mp), rank(), size());
  if (checkModelsMatch) detail::checkModelsMatch(world(), detail::describeModel(*module_));
  broadcastModule(*module_, world());  // every replica and stage starts from world rank 0's weights
  int64_t seed = static_cast<int64_t>(at::detail::getDefaultCPUGenerator().current_seed());
  world().broadcast(&seed, 1, DType::kInt64, 0);
  seedBase_ = static_cast<uint64_t>(seed);
  logStart();
}

PipelineModel::PipelineModel(std::shared_ptr<const pipeline::ModelBuilder> builder, const torch::Tensor& exampleBatch,
                             config::ModelParallelConfig mp, const DistributedModelOptions& options)
    : options_(options), seedBase_(builder->modelSeed()) {
  // Ranks given different settings would build different programs and wait on each other.
  detail::checkModelParallelConfigsMatch(world(), detail::describeModelParallel(mp));
  STRATA_CHECK_WITH(ConfigError,
                    exampleBatch.dim() >= 1 && exampleBatch.size(0) >= mp.microbatches &&
                        exampleBatch.size(0) % mp.microbatches == 0,
                    "/modelparallel/microbatches: ", mp.microbatches, " microbatches do not divide the example batch of ",
                    exampleBatch.dim() >= 1 ? exampleBatch.size(0) : 0, " samples");
  // Checked before any collective, so a bad config fails on every rank alike.
  engine_ = std::make_unique<pipeline::Engine>(std::move(builder), std::move(mp), rank(), size());
  planOn(exampleBatch.narrow(0, 0, exampleBatch.size(0) / engine_->config().microbatches));
  module_ = engine_->model();
  logStart();
}

void PipelineModel::logStart() const {
  const config::ModelParallelConfig& cfg = engine_->config();
  STRATA_LOG(kInfo, kPipe, "DistributedModel: model parallel, ", cfg.partitions, " partition(s) x ",
             engine_->dpSize(), " replica(s), pp_rank ", engine_->ppRank(), " dp_rank ", engine_->dpRank(), ", ",
             cfg.pipeline, " schedule, ", cfg.microbatches, " microbatch(es)");
}

// Optimizer state bytes per gradient byte for the plan: the config's, else the optimizer's
// (when it exists before the plan is made), else Adam's 2.
double PipelineModel::plannedOptimizerStateFactor() const {
  if (engine_->config().optimizerStateFactor) return *engine_->config().optimizerStateFactor;
  if (optimizer_ != nullptr) return optimizerStateFactor(*optimizer_).value_or(2.0);
  return 2.0;
}

void PipelineModel::setOptimizer(torch::optim::Optimizer* optimizer) {
  optimizer_ = optimizer;
  if (optimizer == nullptr || !engine_->planned()) return;
  const std::optional<double> actual = optimizerStateFactor(*optimizer);
  if (actual && *actual != optimizerStateFactor_ && world().rank() == 0)
    STRATA_LOG(kWarn, kPipe, "the pipeline plan assumed optimizer state of ", optimizerStateFactor_,
               " x the gradient bytes, but the optimizer keeps ", *actual,
               " x: memory per rank is off by that much; set \"optimizer_state_factor\": ", *actual,
               " in modelparallel to plan with it");
}

// After the plan this rank's stages are known. Their gradients are reduced across the
// stage's data-parallel replicas with the same buckets as data parallelism (armed for the
// rank's last backward; the rest at kReduceGradients).
void PipelineModel::planOn(const torch::Tensor& sampleMicrobatch) {
  optimizerStateFactor_ = plannedOptimizerStateFactor();
  engine_->makePlan(sampleMicrobatch, world(), optimizerStateFactor_);
  if (engine_->dataParallelGroup() == nullptr) return;
  reducer_ = std::make_unique<GradientReducer>(*engine_->dataParallelGroup(), uniqueTensors(engine_->localParameters()),
                                               GradientReducerOptions{options_.firstBucketMb, options_.bucketCapMb,
                                                                      wireType(options_.gradientDtype)});
  reducer_->setEnabled(false);
}

void PipelineModel::ensurePlanned(const torch::Tensor& data) {
  if (engine_->planned()) return;
  const int microbatches = engine_->config().microbatches;
  const int64_t sample = std::max<int64_t>(1, data.size(0) / microbatches);
  planOn(data.narrow(0, 0, std::min(sample, data.size(0))));
}

torch::Tensor PipelineModel::forward(const torch::Tensor& input) {
  if (call_ != nullptr) return call_->forward(input);
  ensurePlanned(input);  // evaluation before training: plan on (part of) this input
  return engine_->inference(input);
}

void PipelineModel::recordLoss(const torch::Tensor& loss) {
  STRATA_CHECK(call_ != nullptr, "model parallel: backward() is called inside the step function of step()");
  call_->backward(loss);  // the stage runs it when the schedule says
}

pipeline::StepInputs PipelineModel::stepInputs(const torch::Tensor& data, const torch::Tensor& target, int64_t step,
                                               const MicrobatchFn& fn) {
  pipeline::StepInputs in;
  in.data = data;
  in.target = target;
  in.microbatches = engine_->config().microbatches;
  in.step = step;
  if (module_->is_training()) in.seedBase = seedBase_;
  in.lastStage = [this, &fn](pipeline::LastStageCall& call, const torch::Tensor& x, const torch::Tensor& y) {
    const Scope scope(*this, call);
    return fn(x, y);
  };
  if (reducer_) {
    in.beforeBackward = [this](int chunk, int microbatch) {
      if (std::make_pair(chunk, microbatch) == engine_->lastBackward()) reducer_->setEnabled(true);
    };
    in.reduceGradients = [this] { reducer_->reduceNow(); };
  }
  return in;
}

// One step of this rank's pipeline program. The executor calls back into the step
// function on the last stage and into the data-parallel buckets (armed for this rank's
// last backward, reduced at kReduceGradients).
StepOutput PipelineModel::step(const torch::Tensor& data, const torch::Tensor& target, int64_t step,
                               const MicrobatchFn& fn) {
  const config::ModelParallelConfig& mp = engine_->config();
  STRATA_CHECK_WITH(ConfigError, data.dim() >= 1 && data.size(0) % mp.microbatches == 0 && data.size(0) > 0,
                    "/modelparallel/microbatches: ", mp.microbatches, " microbatches do not divide the batch of ",
                    data.dim() >= 1 ? data.size(0) : 0, " samples");
  STRATA_CHECK_WITH(ConfigError, target.dim() >= 1 && target.size(0) == data.size(0), "step(): the target's batch (",
                    target.dim() >= 1 ? target.size(0) : 0, ") differs from the data's (", data.size(0), ")");
  ensurePlanned(data);
  if (stepsRun_++ == 1) {  // after one optimizer step: what each rank holds vs the plan
    const HeldBytes held = heldBytes(engine_->localParameters(), engine_->localBuffers(), optimizer_);
    heldBytes_ = held.total();
    logHeldBytes(world(), static_cast<int64_t>(engine_->predictedRankBytes().at(static_cast<size_t>(engine_->ppRank()))),
                 held, optimizerStateFactor_);
  }
  struct DisableReducer {
    GradientReducer* reducer;
    ~DisableReducer() {
      if (reducer) reducer->setEnabled(false);
    }
  } disable{reducer_.get()};
  {
    pipeline::RngStateGuard generatorState;
    lastReport_ = engine_->step(stepInputs(data, target, step, fn));
  }
  StepOutput out;
  out.outputs = engine_->shareOutputs(lastReport_.outputs);
  return out;
}

void PipelineModel::finishGradientSync() {
  if (reducer_) reducer_->finish();
}

void PipelineModel::zeroGrad() {
  if (reducer_) {
    reducer_->zeroGrad();
    return;
  }
  // Model parallel without replicas: plain gradients.
  torch::NoGradGuard noGrad;
  for (auto& p : module_->parameters(true))
    if (p.grad().defined()) p.mutable_grad().zero_();
}

PipelineStats PipelineModel::stats() const {
  PipelineStats s;
  if (!engine_->planned()) return s;
  const pipeline::StepReport& r = lastReport_;
  s.stepSeconds = r.totalSeconds;
  s.computeSeconds = r.computeSeconds;
  s.backwardSeconds = r.backwardSeconds;
  s.weightGradientSeconds = r.weightGradientSeconds;
  s.recvWaitSeconds = r.recvWaitSeconds;
  s.peakInFlight = r.peakInFlight;
  s.peakStashBytes = r.peakStashBytes;
  const pipeline::PipelinePlan& plan = engine_->plan();
  s.predictedStepSeconds = plan.simulation.stepSeconds;
  s.predictedBubble = plan.simulation.bubbleFraction;
  for (const auto& stage : plan.partition.stages) s.stageFirstLayer.push_back(stage.firstLayer);
  s.plan = pipeline::formatPlan(plan);
  s.predictedStaticBytes =
      static_cast<int64_t>(engine_->predictedRankBytes().at(static_cast<size_t>(engine_->ppRank())));
  s.heldBytes = heldBytes_;
  s.profiledFirstLayer = engine_->profiledLayers().begin;
  s.profiledEndLayer = engine_->profiledLayers().end;
  s.layersBuilt = engine_->layersBuilt();
  return s;
}

}  // namespace strata::adapter
