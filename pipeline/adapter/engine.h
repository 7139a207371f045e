// The model-parallel half of DistributedModel: rank layout, groups, the plan (profile ->
// partition -> programs -> simulation) and the executor, for the layers of a
// torch::nn::Sequential (every rank holds the whole model) or of a LayerList (a rank builds
// only its own layers).
//
// Life cycle (smp's): the engine is built with the model; the plan is made on the first
// step (the first microbatch is the profiling sample; a LayerList's owner plans at once, on
// its example batch). Every pipeline rank profiles a provisional block of layers, all at
// once (owner_profile.h: a LayerList's rank builds only its block), the figures are gathered,
// and every rank cuts the model identically from the first pipeline's table. A provisional
// layer the final partition gives to another rank is freed with the plan. Afterwards localParameters() are the ones of this rank's chunks,
// and tied tensors whose uses sit on different stages have their gradients summed
// (tied_gradients.h).
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
#include "pipeline/adapter/layer_stage.h"
#include "pipeline/adapter/layers.h"
#include "pipeline/adapter/model_builder.h"
#include "pipeline/adapter/profile.h"
#include "pipeline/adapter/tied_gradients.h"
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
  // A LayerList: nothing is built until makePlan(), which builds this rank's layers only
  // (model() is their module tree). Same checks as above.
  Engine(std::shared_ptr<const ModelBuilder> builder, config::ModelParallelConfig mp, int worldRank, int worldSize);
  ~Engine();

  int ppRank() const { return ppRank_; }
  int ppSize() const { return topology_.partitions; }
  int dpRank() const { return dpRank_; }
  int dpSize() const { return topology_.dataParallelSize; }
  Group* pipelineGroup() const { return ppGroup_.get(); }
  Group* dataParallelGroup() const { return dpGroup_.get(); }  // nullptr when dp size is 1
  const config::ModelParallelConfig& config() const { return mp_; }

  bool planned() const { return executor_ != nullptr; }
  // Collective over the world: profiles on the layers' provisional owners, gathers, plans, builds this
  // rank's layers (a LayerList), connects tied tensors. Logs the plan. A failure on any rank
  // (a layer that throws, a tie of different shapes, no partition within the memory cap)
  // throws on every rank. optimizerStateFactor: optimizer state bytes per gradient byte
  // (mp.optimizer_state_factor wins when set).
  void makePlan(const torch::Tensor& sampleMicrobatch, Group& world, double optimizerStateFactor = 2);
  const PipelinePlan& plan() const { return plan_; }
  // The model this engine runs: the Sequential given, or the module tree of this rank's
  // layers of a LayerList (after makePlan; null before).
  std::shared_ptr<torch::nn::Module> model() const { return model_; }
  // Parameters + gradients + optimizer state the plan predicts for every pipeline rank.
  const std::vector<size_t>& predictedRankBytes() const { return predictedRankBytes_; }
  const Program& program() const { return plan_.programs.at(static_cast<size_t>(ppRank_)); }
  // The block of layers this rank profiled (provisionalSplit), and how many layers it built
  // (a LayerList: its block, plus the final partition's layers outside the block; 0 for a
  // model built whole).
  LayerRange profiledLayers() const { return profiled_; }
  int layersBuilt() const { return layersBuilt_; }

  // This rank's parameters and buffers (after planning), with their paths in the model.
  std::vector<std::pair<std::string, torch::Tensor>> localParameters() const;
  std::vector<std::pair<std::string, torch::Tensor>> localBuffers() const;
  int localChunks() const { return static_cast<int>(chunks_.size()); }
  // The (chunk, microbatch) of this rank's last backward in the program (with a split
  // backward, zero_bubble: its last W, which makes the last parameter gradients).
  std::pair<int, int> lastBackward() const { return lastBackward_; }

  // One training step (the StepInputs' shapes and seeds are filled in here).
  StepReport step(StepInputs inputs);
  // Forward without autograd through the whole pipeline; every pipeline rank gets the
  // last stage's output. Collective over the pipeline group.
  torch::Tensor inference(const torch::Tensor& x);
  // Broadcasts the last stage's step outputs to every pipeline rank.
  std::vector<torch::Tensor> shareOutputs(std::vector<torch::Tensor> outputs);

 private:
  void checkConfig(int worldRank, int worldSize);
  LayerProfile profile(const torch::Tensor& sample, Group& world, const ProfileOptions& options);
  torch::nn::AnyModule provisionalLayer(int layer);
  PlanRequest planRequest(Group& world) const;
  void buildLocalLayers(Group& world);
  void connectTies();
  const std::vector<TensorShape>& shapesFor(const torch::Tensor& input);
  std::vector<int> manualStageOfLayer() const;
  int lastStageRank() const { return (plan_.request.schedule.numStages() - 1) % topology_.partitions; }

  std::vector<Layer> layers_;
  std::shared_ptr<torch::nn::Module> model_;
  std::shared_ptr<const ModelBuilder> builder_;   // a LayerList's; null for a whole model
  std::vector<TiedTensor> ties_;                   // tensors shared by layers
  std::vector<std::shared_ptr<void>> tieHandles_;  // keeps one rank's shared accumulators alive
  std::unique_ptr<TiedGradients> tiedGradients_;
  std::vector<size_t> predictedRankBytes_;
  std::vector<torch::nn::AnyModule> provisional_;  // a LayerList's block, built to profile it
  LayerRange profiled_;
  int layersBuilt_ = 0;
  config::ModelParallelConfig mp_;
  Topology topology_;
  int ppRank_ = 0;
  int dpRank_ = 0;
  std::shared_ptr<Group> ppGroup_;
  std::shared_ptr<Group> dpGroup_;
  PipelinePlan plan_;
  std::vector<ChunkRange> chunks_;
  std::unique_ptr<Stage> stage_;        // this rank's chunks: forward, backward, stash
  std::unique_ptr<Executor> executor_;  // interprets the program over stage_
  std::pair<int, int> lastBackward_{0, 0};
  std::map<std::vector<int64_t>, std::vector<TensorShape>> shapeCache_;
};

}  // namespace strata::pipeline
