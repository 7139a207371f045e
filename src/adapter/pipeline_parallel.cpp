// Pipeline model parallelism (parallelism.h): the model cut into stages over a pipeline's
// ranks, replicated for data parallelism when the world holds several pipelines. The work is
// PipelineModel's (pipeline/adapter/pipeline_model.h); this is its face to DistributedModel.
#include "adapter/parallelism.h"
#include "pipeline/adapter/layer_list_model.h"
#include "pipeline/adapter/pipeline_model.h"
#include "strata/runtime.h"

namespace strata::adapter {
namespace {

class PipelineParallel final : public Parallelism {
 public:
  explicit PipelineParallel(std::unique_ptr<PipelineModel> pipeline) : pipeline_(std::move(pipeline)) {}

  std::shared_ptr<torch::nn::Module> module() const override { return pipeline_->module(); }
  Group& group() const override {
    Group* replicas = pipeline_->dataParallelGroup();
    return replicas ? *replicas : world();
  }
  bool modelParallel() const override { return true; }
  bool partitioned() const override { return pipeline_->planned(); }
  int ppRank() const override { return pipeline_->engine().ppRank(); }
  int ppSize() const override { return pipeline_->engine().ppSize(); }
  int dpRank() const override { return pipeline_->engine().dpRank(); }
  int dpSize() const override { return pipeline_->engine().dpSize(); }

  // A rank saves what it holds: its stages, known once planned.
  void prepareStep(const torch::Tensor& data) override { pipeline_->ensurePlanned(data); }
  std::vector<torch::Tensor> step(const torch::Tensor& data, const torch::Tensor& target, int64_t step,
                                  const MicrobatchFn& fn) override {
    return pipeline_->step(data, target, step, fn).outputs;
  }
  torch::Tensor forward(const torch::Tensor& input) override { return pipeline_->forward(input); }
  void backward(const torch::Tensor& loss) override { pipeline_->recordLoss(loss); }
  void zeroGrad() override { pipeline_->zeroGrad(); }
  GradientReducer* reducer() const override { return pipeline_->reducer(); }
  bool holdsLoss() const override { return pipeline_->holdsLastStage(); }

  // What this rank holds: before the plan the whole model, then its stages.
  observe::NamedTensors localParameters() const override {
    if (pipeline_->planned()) return pipeline_->engine().localParameters();
    observe::NamedTensors out;
    for (const auto& p : module()->named_parameters(/*recurse=*/true)) out.emplace_back(p.key(), p.value());
    return out;
  }
  observe::NamedTensors localBuffers() const override {
    if (pipeline_->planned()) return pipeline_->engine().localBuffers();
    observe::NamedTensors out;
    for (const auto& b : module()->named_buffers(/*recurse=*/true)) out.emplace_back(b.key(), b.value());
    return out;
  }
  PipelineStats pipelineStats() const override { return pipeline_->stats(); }
  void setOptimizer(torch::optim::Optimizer* optimizer) override { pipeline_->setOptimizer(optimizer); }
  // Each stage's gradients are on its dp_size() replicas, which hold the same averages.
  double sumOverModel(double value) const override {
    world().allreduce(&value, &value, 1, DType::kFloat64, ReduceOp::kSum);
    return value / dpSize();
  }

 private:
  std::unique_ptr<PipelineModel> pipeline_;
};

}  // namespace

std::unique_ptr<Parallelism> makePipelineParallel(ModelSource source, const config::ModelParallelConfig& mp,
                                                  const DistributedModelOptions& options) {
  return std::make_unique<PipelineParallel>(std::make_unique<PipelineModel>(
      *source.sequential, std::move(source.module), mp, options, options.checkModelsMatch));
}

std::unique_ptr<Parallelism> makeLayerListPipeline(const LayerList& layers, const torch::Tensor& exampleBatch,
                                                   const config::ModelParallelConfig& mp,
                                                   const DistributedModelOptions& options) {
  auto builder = std::make_shared<pipeline::ModelBuilder>(layers, worldModelSeed(world()));
  return std::make_unique<PipelineParallel>(std::make_unique<PipelineModel>(std::move(builder), exampleBatch, mp, options));
}

}  // namespace strata::adapter
