// Data-parallel training of a libtorch module (the model-parallel mode arrives with the
// pipeline issue and uses the same calls).
//
//   strata::DistributedModel model(net);
//   strata::DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 0.1), model);
//   opt.zero_grad();
//   auto out = model.step(x, y, [](auto& m, const torch::Tensor& x, const torch::Tensor& y) {
//     auto loss = torch::nll_loss(m(x), y);
//     m.backward(loss);
//     return loss;
//   });
//   opt.step();
//
// At construction every rank checks that it built the same model (names, shapes,
// dtypes; the first difference is reported by name on every rank) and takes rank 0's
// parameters and buffers. Gradients live in flat buckets (a small first bucket, then
// dataparallel.bucket_cap_mb); each bucket's AllReduce (average) starts on the group's
// communication thread as soon as backward has produced all of its gradients, while
// backward continues. Parameters that do not require gradients are skipped; parameters
// unused in a step contribute zeros; buffers (BatchNorm statistics) are broadcast from
// rank 0 at every training forward, as PyTorch DDP does.
//
// Threading: one training thread drives a DistributedModel.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/group.h"

namespace strata {

// The per-microbatch values a step function returned.
struct StepOutput {
  std::vector<torch::Tensor> outputs;
  // Mean over microbatches (detached).
  torch::Tensor reduce_mean() const;
};

struct DistributedModelOptions {
  Group* group = nullptr;          // default: the world (the data-parallel group)
  double bucketCapMb = -1;         // default: dataparallel.bucket_cap_mb of the job config
  double firstBucketMb = 1;        // the small first bucket, so communication starts early
  std::string gradientDtype;       // "", "float32", "bfloat16", "float16" ("": job config)
  bool broadcastBuffers = true;
  bool checkModelsMatch = true;
};

class DistributedModel {
 public:
  // Any module holder whose forward takes one tensor (torch::nn::Sequential included).
  template <typename M>
  explicit DistributedModel(torch::nn::ModuleHolder<M> module, DistributedModelOptions options = {})
      : DistributedModel(module.ptr(), [m = module.ptr()](const torch::Tensor& x) { return m->forward(x); },
                         std::move(options)) {}
  DistributedModel(std::shared_ptr<torch::nn::Module> module, std::function<torch::Tensor(const torch::Tensor&)> forward,
                   DistributedModelOptions options = {});
  ~DistributedModel();
  DistributedModel(const DistributedModel&) = delete;
  DistributedModel& operator=(const DistributedModel&) = delete;

  torch::Tensor forward(const torch::Tensor& input);
  torch::Tensor operator()(const torch::Tensor& input) { return forward(input); }

  // loss.backward(), then waits for every bucket's AllReduce (gradients averaged).
  void backward(const torch::Tensor& loss);

  using StepFn = std::function<torch::Tensor(DistributedModel&, const torch::Tensor&, const torch::Tensor&)>;
  // Runs fn once per microbatch (one, in data-parallel mode) and returns its outputs.
  StepOutput step(const torch::Tensor& data, const torch::Tensor& target, const StepFn& fn);

  std::vector<torch::Tensor> parameters() const;
  std::shared_ptr<torch::nn::Module> module() const;
  Group& group() const;

  // While the guard lives, backward accumulates gradients locally without communicating
  // (gradient accumulation); the next synchronised backward reduces the accumulated sum.
  class NoSync {
   public:
    explicit NoSync(DistributedModel& model);
    ~NoSync();

   private:
    DistributedModel& model_;
    bool previous_;
  };
  NoSync no_sync() { return NoSync(*this); }

  // Waits for outstanding gradient AllReduces (backward() and DistributedOptimizer call it).
  void finish_gradient_sync();
  // Zeroes the gradient buckets in place.
  void zero_grad();
  void train(bool on = true);
  void eval() { train(false); }

  // Communication statistics since the last reset_stats() (benchmarks, the profiler).
  struct Stats {
    int64_t steps = 0;
    double allreduceSeconds = 0;  // time the bucket AllReduces ran on the comm thread
    double exposedSeconds = 0;    // time the training thread waited for them after backward
    int64_t bytesReduced = 0;
  };
  Stats stats() const;
  void reset_stats();

  // Number of gradient buckets and whether they were rebuilt from the observed order.
  size_t num_buckets() const;
  bool buckets_rebuilt() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Wraps any torch::optim optimizer: step() first waits for the gradient AllReduces.
class DistributedOptimizer {
 public:
  template <typename Opt>
  DistributedOptimizer(Opt optimizer, DistributedModel& model)
      : DistributedOptimizer(std::unique_ptr<torch::optim::Optimizer>(new Opt(std::move(optimizer))), model) {}
  DistributedOptimizer(std::unique_ptr<torch::optim::Optimizer> optimizer, DistributedModel& model);

  void zero_grad();
  void step();
  torch::optim::Optimizer& optimizer() { return *optimizer_; }

 private:
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  DistributedModel& model_;
};

// Data-parallel helpers (SageMaker's names).
int dp_rank();
int dp_size();
// Linear learning-rate scaling for a batch grown by the number of data-parallel ranks.
double scale_lr(double baseLr);

}  // namespace strata
