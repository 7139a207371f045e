// Data parallelism (parallelism.h): every rank holds the whole model and takes rank 0's
// parameters and buffers at construction; the gradient reducer (dp/gradient_reducer.h)
// averages gradients in buckets while backward runs; buffers (BatchNorm statistics) are
// broadcast from rank 0 at every training forward, as PyTorch DDP does.
#include <torch/types.h>

#include "adapter/dp/gradient_reducer.h"
#include "adapter/observe/layer_instrumentation.h"
#include "adapter/ops/model_signature.h"
#include "adapter/ops/unique_tensors.h"
#include "adapter/parallelism.h"
#include "core/logging.h"
#include "strata/runtime.h"
#include "strata/tensor_ops.h"

namespace strata::adapter {
namespace {

observe::NamedTensors namedParameters(const torch::nn::Module& module) {
  observe::NamedTensors out;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) out.emplace_back(p.key(), p.value());
  return out;
}

class DataParallel final : public Parallelism {
 public:
  DataParallel(ModelSource source, const DistributedModelOptions& options)
      : source_(std::move(source)), options_(options), group_(options.group ? options.group : &world()) {
    torch::nn::Module& module = *source_.module;
    if (options.checkModelsMatch) detail::checkModelsMatch(*group_, detail::describeModel(module));
    torch::NoGradGuard noGrad;
    for (const auto& p : module.parameters(/*recurse=*/true)) {
      torch::Tensor t = p.detach();
      broadcast(t, 0, group_);
    }
    for (const auto& b : module.named_buffers(/*recurse=*/true)) buffers_.push_back(b.value());
    for (auto& b : buffers_) broadcast(b, 0, group_);
    reducer_ = std::make_unique<GradientReducer>(
        *group_, uniqueTensors(namedParameters(module)),
        GradientReducerOptions{options.firstBucketMb, options.bucketCapMb, wireType(options.gradientDtype)});
    STRATA_LOG(kInfo, kColl, "DistributedModel: ", reducer_->numParameters(), " synchronised parameters in ",
               reducer_->numBuckets(), " buckets (cap ", options.bucketCapMb, " MB, gradient dtype ",
               options.gradientDtype.empty() ? "float32" : options.gradientDtype, ")");
  }

  std::shared_ptr<torch::nn::Module> module() const override { return source_.module; }
  Group& group() const override { return *group_; }
  bool modelParallel() const override { return false; }
  bool partitioned() const override { return true; }
  int ppRank() const override { return 0; }
  int ppSize() const override { return 1; }
  int dpRank() const override { return group_->rank(); }
  int dpSize() const override { return group_->size(); }

  void prepareStep(const torch::Tensor& /*data*/) override {}

  std::vector<torch::Tensor> step(const torch::Tensor& data, const torch::Tensor& target, int64_t /*step*/,
                                  const MicrobatchFn& fn) override {
    std::vector<torch::Tensor> outputs{fn(data, target)};
    reducer_->finish();
    return outputs;
  }

  torch::Tensor forward(const torch::Tensor& input) override {
    torch::nn::Module& module = *source_.module;
    if (options_.broadcastBuffers && module.is_training() && !buffers_.empty()) {
      torch::NoGradGuard noGrad;
      for (auto& b : buffers_) broadcast(b, 0, group_);
    }
    // A training forward after a step without zero_grad(): the next backward accumulates into
    // this rank's own buckets, starting from the averaged gradients, not into the host's copy.
    if (reducer_->reducesIntoShared() && module.is_training()) reducer_->detachSharedGrads();
    // Per-layer inputs/outputs and times when an observer wants them.
    return instrument::forward(module, source_.forward, input, source_.forwardIsModulesOwn);
  }

  void backward(const torch::Tensor& loss) override {
    loss.backward();
    reducer_->finish();
  }

  void zeroGrad() override { reducer_->zeroGrad(); }
  GradientReducer* reducer() const override { return reducer_.get(); }
  GradientReducer* hostShareableReducer() const override { return reducer_.get(); }
  bool holdsLoss() const override { return true; }
  observe::NamedTensors localParameters() const override { return namedParameters(*source_.module); }
  observe::NamedTensors localBuffers() const override {
    observe::NamedTensors out;
    for (const auto& b : source_.module->named_buffers(/*recurse=*/true)) out.emplace_back(b.key(), b.value());
    return out;
  }
  double sumOverModel(double value) const override { return value; }

 private:
  ModelSource source_;
  DistributedModelOptions options_;
  Group* group_;
  std::vector<torch::Tensor> buffers_;  // broadcast at training forwards
  std::unique_ptr<GradientReducer> reducer_;
};

}  // namespace

std::unique_ptr<Parallelism> makeDataParallel(ModelSource source, const DistributedModelOptions& options) {
  return std::make_unique<DataParallel>(std::move(source), options);
}

}  // namespace strata::adapter
