// The model-parallel half of DistributedModel: rank layout, groups, the plan (profile ->
// partition -> programs -> simulation) and the executor, for a torch::nn::Sequential.
//
// Life cycle (smp's): the engine is built with the model; the plan is made on the first
// step (the first microbatch is the profiling sample) on every rank from world rank 0's
// measurements, so all ranks cut the model identically. Until then the engine owns no
// parameters; afterwards localParameters() are the ones of this rank's chunks.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <map>
#include <memory>
#include <vector>

#include "config/config.h"
#include "pipeline/plan.h"
#include "pipeline/topology.h"
#include "pipeline/adapter/executor.h"
#include "pipeline/adapter/layers.h"
#include "strata/group.h"

namespace strata::pipeline {

class Engine {
 public:
  // Collective over the world (creates the pipeline and data-parallel groups). Throws
  // strata::ConfigError on every rank for a config that cannot work with this model and
  // world (more stages than layers, partitions not dividing the world, manual partition
  // naming unknown layers).
  Engine(std::vector<Layer> layers, std::shared_ptr<torch::nn::Module> model, config::ModelParallelConfig mp,
         int worldRank, int worldSize);

  int ppRank() const { return ppRank_; }
  int ppSize() const { return topology_.partitions; }
  int dpRank() const { return dpRank_; }
  int dpSize() const { return topology_.dataParallelSize; }
  Group* pipelineGroup() const { return ppGroup_.get(); }
  Group* dataParallelGroup() const { return dpGroup_.get(); }  // nullptr when dp size is 1
  const config::ModelParallelConfig& config() const { return mp_; }

  bool planned() const { return executor_ != nullptr; }
  // Collective over the world: profiles on world rank 0, broadcasts, plans. Logs the plan.
  void makePlan(const torch::Tensor& sampleMicrobatch, Group& world);
  const PipelinePlan& plan() const { return plan_; }
  const Program& program() const { return plan_.programs.at(static_cast<size_t>(ppRank_)); }

  // This rank's parameters and buffers (after planning), with their paths in the model.
  std::vector<std::pair<std::string, torch::Tensor>> localParameters() const;
  std::vector<std::pair<std::string, torch::Tensor>> localBuffers() const;
  int localChunks() const { return static_cast<int>(chunks_.size()); }
  // The (chunk, microbatch) of this rank's last backward in the program.
  std::pair<int, int> lastBackward() const { return lastBackward_; }

  // One training step (the StepInputs' shapes and seeds are filled in here).
  StepReport step(StepInputs inputs);
  torch::Tensor forwardChunk(int chunk, int microbatch, const torch::Tensor& x);
  // Forward without autograd through the whole pipeline; every pipeline rank gets the
  // last stage's output. Collective over the pipeline group.
  torch::Tensor inference(const torch::Tensor& x);
  // Broadcasts the last stage's step outputs to every pipeline rank.
  std::vector<torch::Tensor> shareOutputs(std::vector<torch::Tensor> outputs);

 private:
  const std::vector<TensorShape>& shapesFor(const torch::Tensor& input);
  std::vector<int> manualStageOfLayer() const;
  int lastStageRank() const { return (plan_.request.schedule.numStages() - 1) % topology_.partitions; }

  std::vector<Layer> layers_;
  std::shared_ptr<torch::nn::Module> model_;
  config::ModelParallelConfig mp_;
  Topology topology_;
  int ppRank_ = 0;
  int dpRank_ = 0;
  std::shared_ptr<Group> ppGroup_;
  std::shared_ptr<Group> dpGroup_;
  PipelinePlan plan_;
  std::vector<ChunkRange> chunks_;
  std::unique_ptr<Executor> executor_;
  std::pair<int, int> lastBackward_{0, 0};
  std::map<std::vector<int64_t>, std::vector<TensorShape>> shapeCache_;
};

}  // namespace strata::pipeline
