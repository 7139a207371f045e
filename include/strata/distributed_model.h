// Data-parallel, pipeline-parallel (model-parallel) and hybrid training of a libtorch
// module with the same calls. The job config's "modelparallel" section chooses the mode
// (docs/pipeline.md has the pipeline in full).
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
// Model parallelism (modelparallel.enabled, a torch::nn::Sequential): the model's children
// are cut into contiguous stages, one (or virtual_stages) per pipeline rank; world = p x d
// ranks (d data-parallel replicas of the pipeline with ddp). The cut is made on the first
// step() from a profile of every layer on the first microbatch (or from manual_partition).
// step() splits the batch into `microbatches` and runs this rank's program (simple or
// interleaved schedule): non-last stages run forward and backward of their layers only; on
// the last stage the step function runs once per microbatch, where m(x) is the last stage's
// forward and m.backward(loss) registers the loss; the executor runs its backward when the
// schedule says, scaled by 1/microbatches (gradients are the mean over microbatches, as one
// process running (loss / m).backward() per microbatch). The step outputs are broadcast to
// every rank of the pipeline. Dropout draws from a generator re-seeded per (step,
// microbatch, layer), so results do not depend on the partition count (docs/pipeline.md).
// Every rank of a pipeline must call step() with the same batch (shard data by dp_rank()).
// Outside step(), m(x) runs the pipeline forward without autograd (evaluation) and returns
// the last stage's output on every pipeline rank (partitioning first if no step has).
//
// Threading: one training thread drives a DistributedModel.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>
#include <torch/ordered_dict.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/group.h"
#include "strata/layer_list.h"

namespace strata {

namespace adapter {
class Parallelism;
}

// The per-microbatch values a step function returned.
struct StepOutput {
  std::vector<torch::Tensor> outputs;
  // Mean over microbatches (detached).
  torch::Tensor reduce_mean() const;
  // Sum over microbatches (detached).
  torch::Tensor reduce_sum() const;
};

struct DistributedModelOptions {
  Group* group = nullptr;          // default: the world (the data-parallel group)
  double bucketCapMb = -1;         // default: dataparallel.bucket_cap_mb of the job config
  double firstBucketMb = 1;        // the small first bucket, so communication starts early
  std::string gradientDtype;       // "", "float32", "bfloat16", "float16" ("": job config)
  bool broadcastBuffers = true;
  bool checkModelsMatch = true;
  // Model parallelism: a JSON object in the job config's "modelparallel" form, validated
  // like the job config, used instead of the job config's section (tests, benchmarks).
  std::string modelParallel;
};

// What the last pipelined step did on this rank, beside the planner's prediction.
struct PipelineStats {
  double stepSeconds = 0;          // the executor's run of this rank's program
  double computeSeconds = 0;       // forward + backward
  double backwardSeconds = 0;      // of which backward (B and W with zero_bubble)
  double weightGradientSeconds = 0;  // of which W (zero_bubble's weight-gradient passes)
  double recvWaitSeconds = 0;      // blocked in receives
  int peakInFlight = 0;            // chunk-microbatches stashed at once
  int64_t peakStashBytes = 0;      // boundary tensors of those (inputs and outputs)
  double predictedStepSeconds = 0;  // the simulator, from the profile
  double predictedBubble = 0;       // idle / (ranks x step), simulated
  std::vector<int> stageFirstLayer;  // the cut: first layer of every global stage
  std::string plan;                  // the planner's report (formatPlan)
  // This rank's parameters (and buffers) + gradients + optimizer state: as the plan predicts
  // them, and as held at the start of step 1 (after one optimizer step; -1 before).
  int64_t predictedStaticBytes = 0;
  int64_t heldBytes = -1;
  // The start-up profile: the layers this rank measured ([first, end), its provisional block)
  // and how many layers it built in all (a LayerList; 0 for a model built whole).
  int profiledFirstLayer = 0;
  int profiledEndLayer = 0;
  int layersBuilt = 0;
};

class DistributedModel {
 public:
  // Any module holder whose forward takes one tensor (torch::nn::Sequential included).
  template <typename M>
  explicit DistributedModel(torch::nn::ModuleHolder<M> module, DistributedModelOptions options = {})
      : DistributedModel(ModulesOwnForward{}, module.ptr(),
                         [m = module.ptr()](const torch::Tensor& x) { return m->forward(x); }, std::move(options)) {}
  // A Sequential: also the model-parallel mode (its children are the layers cut into stages).
  explicit DistributedModel(torch::nn::Sequential module, DistributedModelOptions options = {});
  DistributedModel(std::shared_ptr<torch::nn::Module> module, std::function<torch::Tensor(const torch::Tensor&)> forward,
                   DistributedModelOptions options = {});
  // A model described by a LayerList (strata/layer_list.h): nothing of other pipeline
  // stages is ever built on this rank. Model parallel: the plan is made here, from a profile
  // of the layers on the first batch/microbatches rows of `exampleBatch` (shaped like the
  // batches step() will get), and only this rank's layers are built. Otherwise (one
  // process, data parallel) every layer is built. module() is a Sequential of the built
  // layers (groups as nested Sequentials), so parameter paths are the list's. Collective over
  // the world; a factory that throws, a bad tie or no feasible partition throws on every rank.
  DistributedModel(const LayerList& layers, const torch::Tensor& exampleBatch, DistributedModelOptions options = {});
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

  // Every parameter of the model, a tied tensor once (model parallel: the optimizer steps
  // only the ones with gradients, which are this rank's after the first step; a LayerList
  // model holds only this rank's).
  std::vector<torch::Tensor> parameters() const;
  // This rank's parameters: all of them, or (model parallel, after the first step) those of
  // its stages.
  std::vector<torch::Tensor> local_parameters() const;
  // This rank's parameters and buffers by their path in the model ("3.weight").
  torch::OrderedDict<std::string, torch::Tensor> local_state_dict() const;
  std::shared_ptr<torch::nn::Module> module() const;
  // The data-parallel group (model parallel: the replicas of this rank's stage).
  Group& group() const;

  bool model_parallel() const;
  bool partitioned() const;  // model parallel: the first step cut the model
  int pp_rank() const;
  int pp_size() const;
  int dp_rank() const;
  int dp_size() const;
  PipelineStats pipeline_stats() const;

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
  // Clears the gradients (PyTorch's set_to_none): .grad() is undefined until the next
  // backward places each parameter's gradient in its bucket (docs/collectives.md).
  void zero_grad();
  // train()/eval() also reset the mode to TRAIN/EVAL (see set_mode).
  void train(bool on = true);
  void eval() { train(false); }
  // The mode of the steps the debugger and profiler see (smdebug's hook.set_mode): TRAIN
  // while the module is training, EVAL after eval(), or what set_mode() chose (PREDICT for
  // inference) until the next train()/eval(). step() is one step of this mode; outside
  // step(), each forward in a mode other than TRAIN is one step of that mode.
  void set_mode(Mode mode);
  Mode mode() const;

  // Communication statistics since the last reset_stats() (benchmarks, the profiler).
  struct Stats {
    int64_t steps = 0;
    double allreduceSeconds = 0;  // time the bucket AllReduces ran on the comm thread
    // CPU time the comm thread spent on them: with as many busy ranks as cores, CPU the
    // training threads did not get.
    double allreduceCpuSeconds = 0;
    double exposedSeconds = 0;    // time the training thread waited for them after backward
    int64_t bytesReduced = 0;
    // Of those, the bytes this rank read where autograd left them (its own shard of each
    // bucket, with more than one rank) instead of copying them into the bucket first.
    int64_t bytesReadInPlace = 0;
  };
  Stats stats() const;
  void reset_stats();

  // Number of gradient buckets and whether they were rebuilt from the observed order.
  size_t num_buckets() const;
  bool buckets_rebuilt() const;

  // Training steps taken (step() calls). Checkpoints save it; set_steps_taken() resumes the
  // count (before the next step()). The profiler and the debugger number steps globally
  // (every mode's steps count, evaluation forwards included) and per mode.
  int64_t steps_taken() const;
  void set_steps_taken(int64_t steps);

 private:
  friend class DistributedOptimizer;  // tells a pipeline which optimizer steps its parameters
  // How this model trains (src/adapter/parallelism.h), chosen at construction.
  adapter::Parallelism& parallelism() const;
  int64_t lastStepGlobal() const;  // the global (observed) step of the last step()
  // Tag: `forward` is module->forward, so the per-layer instrumentation may run a
  // Sequential's children one by one in its place (a user's forward function may differ).
  struct ModulesOwnForward {};
  DistributedModel(ModulesOwnForward, std::shared_ptr<torch::nn::Module> module,
                   std::function<torch::Tensor(const torch::Tensor&)> forward, DistributedModelOptions options);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  void init(std::shared_ptr<torch::nn::Module> module, std::function<torch::Tensor(const torch::Tensor&)> forward,
            DistributedModelOptions options, const torch::nn::Sequential* sequential, bool forwardIsModulesOwn);
};

namespace adapter {
class OptimizerSharding;
class HostSharedState;
}

struct DistributedOptimizerOptions {
  // Sharded optimizer state (ZeRO stage 1): -1 takes dataparallel.shard_optimizer_state of the
  // job config, 0 off, 1 on.
  int shardOptimizerState = -1;
  // Host-shared parameters (needs sharded state): -1 takes dataparallel.host_shared_parameters,
  // 0 off, 1 on.
  int hostSharedParameters = -1;
};

// Wraps any torch::optim optimizer: step() first waits for the gradient AllReduces.
//
// With sharded optimizer state (docs/collectives.md "Sharded optimizer state"), each
// data-parallel rank keeps the optimizer state of its shard of the parameters only (whole
// tensors, greedy by size): the wrapped optimizer's param groups are rebuilt here to hold just
// this rank's shard (group options kept), step() steps the shard and then broadcasts every
// parameter from its owner, so every rank holds identical parameters, bitwise those of an
// unsharded run. A model-parallel model is sharded at the first step(), over its data-parallel
// group, once its stages are known. Changing the parameter set afterwards (a param group added,
// parameters replaced) makes step() throw on every rank. Checkpoints of a sharded optimizer are
// partial (every rank writes its shard) and resume on any data-parallel size.
//
// With host-shared parameters as well (docs/collectives.md "Host-shared parameters"), when all
// data-parallel ranks are on one host, the parameters, their averaged gradients and the
// optimizer state become one copy per host in shared memory from the second step on: each
// rank reduce-scatters the gradients and steps its shard of the elements in place, nothing is
// broadcast, and the param groups hold this rank's pieces (1-D tensors over the parameters).
// Gradients after backward are views of the host's one averaged copy until zero_grad():
// change them with clip_grad_norm(), not in place, and change parameters outside step() on
// one rank only (every rank sees the same memory).
class DistributedOptimizer {
 public:
  template <typename Opt>
  DistributedOptimizer(Opt optimizer, DistributedModel& model, DistributedOptimizerOptions options = {})
      : DistributedOptimizer(std::unique_ptr<torch::optim::Optimizer>(new Opt(std::move(optimizer))), model,
                             options) {}
  DistributedOptimizer(std::unique_ptr<torch::optim::Optimizer> optimizer, DistributedModel& model,
                       DistributedOptimizerOptions options = {});
  ~DistributedOptimizer();
  DistributedOptimizer(const DistributedOptimizer&) = delete;
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;

  void zero_grad();
  void step();
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  // Whether the optimizer state is sharded across the data-parallel ranks.
  bool sharded() const { return shardState_; }
  // Whether the parameters are one host-shared copy now (see above).
  bool host_shared() const { return hostShared_ != nullptr; }
  // Scales the averaged gradients (after backward) so their global L2 norm is at most
  // maxNorm, in every mode (torch::nn::utils::clip_grad_norm_ for data parallelism, summed
  // over the stages of a pipeline); returns the norm before. Collective.
  double clip_grad_norm(double maxNorm);
  // For checkpoints: the optimizer whose state a checkpoint writes or loads into. With
  // host-shared parameters, an optimizer over this rank's whole parameters built from the
  // host's state (collective; the same object until the next step). After loading into it,
  // call state_loaded() (collective).
  torch::optim::Optimizer& state_optimizer();
  void state_loaded();
  // Bytes of the tensors this rank's optimizer state holds now (SGD, Adam, AdamW, Adagrad,
  // RMSprop; 0 for others).
  size_t state_bytes() const;

 private:
  void shardIfReady();
  void shareHostIfReady();
  // Collective: throws on every rank when the parameter set changed after sharding.
  void checkParameterSet();
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  DistributedModel& model_;
  bool shardState_ = false;
  std::unique_ptr<adapter::OptimizerSharding> sharding_;
  bool hostSharedWanted_ = false;
  bool hostSharedDecided_ = false;
  std::unique_ptr<adapter::HostSharedState> hostShared_;
  std::unique_ptr<torch::optim::Optimizer> stateView_;  // state_optimizer() with host sharing
  int64_t stateViewSteps_ = -1;  // steps taken when stateView_ was built
  int64_t stepsTaken_ = 0;
};

// Rank layout helpers (SageMaker's names), from the job config: with model parallelism the
// world is pp_size() x dp_size() ranks (modelparallel.placement_strategy).
int dp_rank();
int dp_size();
int pp_rank();
int pp_size();
// Linear learning-rate scaling for a batch grown by the number of data-parallel ranks.
double scale_lr(double baseLr);

}  // namespace strata
