// DistributedModel and DistributedOptimizer: the wiring of data parallelism (the gradient
// reducer, gradient_reducer.h), model parallelism (pipeline_model.h) and the step observers
// (observers.h), which every step's events go through.
#include "strata/distributed_model.h"

#include <ATen/Parallel.h>
#include <torch/types.h>

#include <cmath>
#include <optional>
#include <thread>

#include "adapter/checkpoint_state.h"
#include "adapter/gradient_reducer.h"
#include "adapter/host_shared_state.h"
#include "adapter/layer_instrumentation.h"
#include "adapter/layer_list_model.h"
#include "adapter/model_signature.h"
#include "adapter/observers.h"
#include "adapter/optimizer_sharding.h"
#include "adapter/optimizer_state.h"
#include "adapter/pipeline_model.h"
#include "adapter/step_modes.h"
#include "core/affinity.h"
#include "core/errors.h"
#include "core/logging.h"
#include "debugger/naming.h"
#include "runtime/launch.h"
#include "runtime/runtime_internal.h"
#include "strata/runtime.h"
#include "strata/tensor_ops.h"

namespace strata {
namespace {

using observe::observers;

config::ModelParallelConfig modelParallelConfig(const DistributedModelOptions& options) {
  if (options.modelParallel.empty()) return runtime::jobConfig().modelParallel;
  return config::parseJobConfig("{\"modelparallel\": " + options.modelParallel + "}",
                                "DistributedModelOptions::modelParallel")
      .modelParallel;
}

observe::NamedTensors namedParameters(const torch::nn::Module& module) {
  observe::NamedTensors out;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) out.emplace_back(p.key(), p.value());
  return out;
}

// Intra-op threads: OMP_NUM_THREADS, else the host's cores shared among its ranks, at most
// the cores this rank is bound to.
void setIntraOpThreads() {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(
      runtime::intraOpThreads(runtime::launchEnvironment(), cores, ownCpuCount(), local_size()));
}

torch::Tensor detachedStack(const std::vector<torch::Tensor>& outputs) {
  std::vector<torch::Tensor> detached;
  for (const auto& t : outputs) detached.push_back(t.detach().to(torch::kFloat64));
  return torch::stack(detached);
}

}  // namespace

torch::Tensor StepOutput::reduce_mean() const {
  STRATA_CHECK(!outputs.empty(), "reduce_mean of a step that returned no outputs");
  return detachedStack(outputs).mean();
}

torch::Tensor StepOutput::reduce_sum() const {
  STRATA_CHECK(!outputs.empty(), "reduce_sum of a step that returned no outputs");
  return detachedStack(outputs).sum();
}

struct DistributedModel::Impl {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const torch::Tensor&)> forwardFn;
  bool forwardIsModulesOwn = false;  // forwardFn is module->forward (the module-holder constructors)
  DistributedModelOptions options;
  Group* group = nullptr;
  std::vector<torch::Tensor> buffers;                 // data parallel: broadcast at training forwards
  std::unique_ptr<adapter::GradientReducer> reducer;  // data parallel
  std::unique_ptr<adapter::PipelineModel> pipeline;   // model parallel
  std::vector<std::shared_ptr<void>> tieHandles;      // a LayerList's tied tensors (one process)
  int64_t stepCount = 0;  // step() calls: the pipeline's per-step seeds, checkpoints
  // Observed steps (smdebug's hook steps, adapter/step_modes.h): evaluation and prediction
  // forwards outside step() are steps too.
  adapter::StepCounter observedSteps;
  int64_t lastStepGlobal = -1;        // global step of the last step()
  std::optional<Mode> modeOverride;   // set_mode(); cleared by train()/eval()
  bool inStep = false;
  // Marks an observed step as open for its scope (forwards inside it are no steps of their own).
  struct StepScope {
    explicit StepScope(Impl& impl) : m(impl) { m.inStep = true; }
    ~StepScope() { m.inStep = false; }
    StepScope(const StepScope&) = delete;
    StepScope& operator=(const StepScope&) = delete;
    Impl& m;
  };

  Mode mode() const { return adapter::observedMode(modeOverride, module->is_training()); }
  // Opens an observed step of the current mode; returns its global step.
  int64_t beginObservedStep(observe::Observers& obs) {
    const Mode m = mode();
    const adapter::StepCounter::Numbers n = observedSteps.next(m);
    obs.stepBegin(n.global, m, n.modeStep);
    return n.global;
  }

  // The reducer of this rank's gradients (data parallel, or a pipeline stage's replicas).
  adapter::GradientReducer* activeReducer() const {
    return pipeline ? pipeline->reducer() : reducer.get();
  }
  std::string topClass() const { return debugger::moduleClassName(module->name()); }
  // What this rank holds: the whole model, or (model parallel, once planned) its stages.
  observe::NamedTensors localParameters() const {
    if (pipeline && pipeline->planned()) return pipeline->engine().localParameters();
    return namedParameters(*module);
  }
  bool holdsLoss() const { return !pipeline || pipeline->holdsLastStage(); }
};

DistributedModel::DistributedModel(std::shared_ptr<torch::nn::Module> module,
                                   std::function<torch::Tensor(const torch::Tensor&)> forward,
                                   DistributedModelOptions options)
    : impl_(std::make_unique<Impl>()) {
  init(std::move(module), std::move(forward), std::move(options), nullptr);
}

DistributedModel::DistributedModel(ModulesOwnForward, std::shared_ptr<torch::nn::Module> module,
                                   std::function<torch::Tensor(const torch::Tensor&)> forward,
                                   DistributedModelOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->forwardIsModulesOwn = true;
  init(std::move(module), std::move(forward), std::move(options), nullptr);
}

DistributedModel::DistributedModel(torch::nn::Sequential module, DistributedModelOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->forwardIsModulesOwn = true;
  init(module.ptr(), [m = module.ptr()](const torch::Tensor& x) { return m->forward(x); }, std::move(options),
       &module);
}

void DistributedModel::init(std::shared_ptr<torch::nn::Module> module,
                            std::function<torch::Tensor(const torch::Tensor&)> forward, DistributedModelOptions options,
                            const torch::nn::Sequential* sequential) {
  Impl& m = *impl_;
  m.module = std::move(module);
  m.forwardFn = std::move(forward);
  m.group = options.group ? options.group : &world();
  const config::JobConfig& cfg = runtime::jobConfig();
  if (options.bucketCapMb <= 0) options.bucketCapMb = cfg.dataParallel.bucketCapMb;
  if (options.gradientDtype.empty()) options.gradientDtype = cfg.dataParallel.gradientDtype;
  m.options = options;
  setIntraOpThreads();
  const config::ModelParallelConfig mp = modelParallelConfig(options);
  if (mp.enabled) {
    STRATA_CHECK_WITH(ConfigError, sequential != nullptr, "/modelparallel/enabled: ",
                      pipeline::notASequentialMessage(*m.module));
    m.pipeline = std::make_unique<adapter::PipelineModel>(*sequential, m.module, mp, options, options.checkModelsMatch);
    m.group = m.pipeline->dataParallelGroup() ? m.pipeline->dataParallelGroup() : &world();
    observe::registerJobObservers();
    return;
  }
  if (options.checkModelsMatch) detail::checkModelsMatch(*m.group, detail::describeModel(*m.module));
  {
    torch::NoGradGuard noGrad;
    for (const auto& p : m.module->parameters(/*recurse=*/true)) {
      torch::Tensor t = p.detach();
      broadcast(t, 0, m.group);
    }
    for (const auto& b : m.module->named_buffers(/*recurse=*/true)) m.buffers.push_back(b.value());
    for (auto& b : m.buffers) broadcast(b, 0, m.group);
  }
  m.reducer = std::make_unique<adapter::GradientReducer>(
      *m.group, adapter::uniqueTensors(namedParameters(*m.module)),
      adapter::GradientReducerOptions{options.firstBucketMb, options.bucketCapMb,
                                      adapter::wireType(options.gradientDtype)});
  // The observers exist before the first step, so a checkpoint can restore the debugger's
  // counters.
  observe::registerJobObservers();
  STRATA_LOG(kInfo, kColl, "DistributedModel: ", m.reducer->numParameters(), " synchronised parameters in ",
             m.reducer->numBuckets(), " buckets (cap ", options.bucketCapMb, " MB, gradient dtype ",
             options.gradientDtype.empty() ? "float32" : options.gradientDtype, ")");
}

DistributedModel::DistributedModel(const LayerList& layers, const torch::Tensor& exampleBatch,
                                   DistributedModelOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.forwardIsModulesOwn = true;
  const config::ModelParallelConfig mp = modelParallelConfig(options);
  auto builder = std::make_shared<pipeline::ModelBuilder>(layers, adapter::worldModelSeed(world()));
  if (!mp.enabled) {  // every layer, in one process or on every data-parallel rank
    adapter::WholeModel whole = adapter::buildWholeModel(*builder, options.group ? *options.group : world());
    m.tieHandles = std::move(whole.tieHandles);
    init(whole.root.ptr(), [root = whole.root.ptr()](const torch::Tensor& x) { return root->forward(x); },
         std::move(options), &whole.root);
    return;
  }
  const config::JobConfig& cfg = runtime::jobConfig();
  if (options.bucketCapMb <= 0) options.bucketCapMb = cfg.dataParallel.bucketCapMb;
  if (options.gradientDtype.empty()) options.gradientDtype = cfg.dataParallel.gradientDtype;
  m.options = options;
  setIntraOpThreads();  // as init() does
  m.pipeline = std::make_unique<adapter::PipelineModel>(std::move(builder), exampleBatch, mp, options);
  m.module = m.pipeline->module();
  m.forwardFn = [root = m.module](const torch::Tensor& x) { return root->as<torch::nn::Sequential>()->forward(x); };
  m.group = m.pipeline->dataParallelGroup() ? m.pipeline->dataParallelGroup() : &world();
  observe::registerJobObservers();
}

DistributedModel::~DistributedModel() = default;

torch::Tensor DistributedModel::forward(const torch::Tensor& input) {
  Impl& m = *impl_;
  if (adapter::forwardIsItsOwnStep(m.inStep, m.mode())) {
    // Evaluation or prediction outside step(): each forward is one step of its mode, as each
    // top-level forward is for smdebug's hook (a TRAIN forward outside step() is not one).
    observe::Observers& obs = observers();
    const Impl::StepScope scope(m);
    const int64_t global = m.beginObservedStep(obs);
    if (obs.wantsTensors()) obs.parameters(m.topClass(), m.localParameters());
    torch::Tensor out = forwardUnobserved(input);
    obs.stepEnd(global);
    return out;
  }
  return forwardUnobserved(input);
}

torch::Tensor DistributedModel::forwardUnobserved(const torch::Tensor& input) {
  Impl& m = *impl_;
  if (m.pipeline) return m.pipeline->forward(input);
  if (m.options.broadcastBuffers && m.module->is_training() && !m.buffers.empty()) {
    torch::NoGradGuard noGrad;
    for (auto& b : m.buffers) broadcast(b, 0, m.group);
  }
  // A training forward after a step without zero_grad(): the next backward accumulates into
  // this rank's own buckets, starting from the averaged gradients, not into the host's copy.
  if (m.reducer && m.reducer->reducesIntoShared() && m.module->is_training()) m.reducer->detachSharedGrads();
  // Per-layer inputs/outputs and times when an observer wants them.
  return instrument::forward(*m.module, m.forwardFn, input, m.forwardIsModulesOwn);
}

void DistributedModel::backward(const torch::Tensor& loss) {
  if (impl_->pipeline) {
    impl_->pipeline->recordLoss(loss);
    return;
  }
  loss.backward();
  finish_gradient_sync();
}

StepOutput DistributedModel::step(const torch::Tensor& data, const torch::Tensor& target, const StepFn& fn) {
  Impl& m = *impl_;
  if (m.pipeline) m.pipeline->ensurePlanned(data);  // a rank saves what it holds: its stages
  const int64_t step = m.stepCount++;
  observe::Observers& obs = observers();
  const Impl::StepScope scope(m);
  const int64_t global = m.beginObservedStep(obs);
  m.lastStepGlobal = global;
  if (obs.wantsTensors()) obs.parameters(m.topClass(), m.localParameters());
  StepOutput out;
  if (m.pipeline) {
    out = m.pipeline->step(data, target, step,
                           [this, &fn](const torch::Tensor& x, const torch::Tensor& y) { return fn(*this, x, y); });
  } else {
    out.outputs.push_back(fn(*this, data, target));
    finish_gradient_sync();
  }
  if (m.holdsLoss()) obs.loss(out.reduce_mean());  // a pipeline's loss lives on its last stage
  obs.stepEnd(global);
  return out;
}

PipelineStats DistributedModel::pipeline_stats() const {
  return impl_->pipeline ? impl_->pipeline->stats() : PipelineStats{};
}

void DistributedModel::finish_gradient_sync() {
  if (adapter::GradientReducer* r = impl_->activeReducer()) r->finish();
}

void DistributedModel::zero_grad() {
  if (impl_->pipeline) {
    impl_->pipeline->zeroGrad();
    return;
  }
  impl_->reducer->zeroGrad();
}

std::vector<torch::Tensor> DistributedModel::parameters() const {
  return adapter::uniqueTensors(impl_->module->parameters(true));
}

std::vector<torch::Tensor> DistributedModel::local_parameters() const {
  std::vector<torch::Tensor> out;
  for (auto& p : adapter::uniqueTensors(impl_->localParameters())) out.push_back(p.second);
  return out;
}

torch::OrderedDict<std::string, torch::Tensor> DistributedModel::local_state_dict() const {
  torch::OrderedDict<std::string, torch::Tensor> out;
  const Impl& m = *impl_;
  if (m.pipeline && m.pipeline->planned()) {
    for (auto& p : m.pipeline->engine().localParameters()) out.insert(p.first, p.second);
    for (auto& b : m.pipeline->engine().localBuffers()) out.insert(b.first, b.second);
    return out;
  }
  for (const auto& p : m.module->named_parameters(true)) out.insert(p.key(), p.value());
  for (const auto& b : m.module->named_buffers(true)) out.insert(b.key(), b.value());
  return out;
}

bool DistributedModel::model_parallel() const { return impl_->pipeline != nullptr; }
bool DistributedModel::partitioned() const { return impl_->pipeline && impl_->pipeline->planned(); }
int DistributedModel::pp_rank() const { return impl_->pipeline ? impl_->pipeline->engine().ppRank() : 0; }
int DistributedModel::pp_size() const { return impl_->pipeline ? impl_->pipeline->engine().ppSize() : 1; }
int DistributedModel::dp_rank() const {
  return impl_->pipeline ? impl_->pipeline->engine().dpRank() : impl_->group->rank();
}
int DistributedModel::dp_size() const {
  return impl_->pipeline ? impl_->pipeline->engine().dpSize() : impl_->group->size();
}
std::shared_ptr<torch::nn::Module> DistributedModel::module() const { return impl_->module; }
Group& DistributedModel::group() const { return *impl_->group; }
void DistributedModel::train(bool on) {
  impl_->module->train(on);
  impl_->modeOverride.reset();
}

DistributedModel::Stats DistributedModel::stats() const {
  Stats s;
  if (const adapter::GradientReducer* r = impl_->activeReducer()) {
    const adapter::GradientReducerStats rs = r->stats();
    s.steps = rs.steps;
    s.allreduceSeconds = rs.allreduceSeconds;
    s.allreduceCpuSeconds = rs.allreduceCpuSeconds;
    s.exposedSeconds = rs.exposedSeconds;
    s.bytesReduced = rs.bytesReduced;
    s.bytesReadInPlace = rs.bytesReadInPlace;
  }
  return s;
}

void DistributedModel::reset_stats() {
  if (adapter::GradientReducer* r = impl_->activeReducer()) r->resetStats();
}
size_t DistributedModel::num_buckets() const {
  const adapter::GradientReducer* r = impl_->activeReducer();
  return r ? r->numBuckets() : 0;
}
bool DistributedModel::buckets_rebuilt() const {
  const adapter::GradientReducer* r = impl_->activeReducer();
  return r && r->rebuilt();
}
int64_t DistributedModel::steps_taken() const { return impl_->stepCount; }
void DistributedModel::set_steps_taken(int64_t steps) {
  // Resuming: observed steps continue from the training steps taken (earlier evaluation
  // steps are not in the checkpoint).
  Impl& m = *impl_;
  m.stepCount = steps;
  m.observedSteps.resume(steps);
  m.lastStepGlobal = steps - 1;
}
void DistributedModel::set_mode(Mode mode) { impl_->modeOverride = mode; }
Mode DistributedModel::mode() const { return impl_->mode(); }

DistributedModel::NoSync::NoSync(DistributedModel& model) : model_(model), previous_(true) {
  model_.finish_gradient_sync();
  if (adapter::GradientReducer* r = model_.impl_->activeReducer()) {
    previous_ = r->enabled();
    r->setEnabled(false);
  }
}

DistributedModel::NoSync::~NoSync() {
  if (adapter::GradientReducer* r = model_.impl_->activeReducer()) r->setEnabled(previous_);
}

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
  if (model_.impl_->pipeline) model_.impl_->pipeline->setOptimizer(optimizer_.get());
  shardIfReady();  // before any checkpoint is loaded: it then restores only this rank's shard
}

DistributedOptimizer::~DistributedOptimizer() {
  if (model_.impl_->pipeline) model_.impl_->pipeline->setOptimizer(nullptr);
}

void DistributedOptimizer::shardIfReady() {
  // A pipeline knows this rank's parameters once its first step has cut the model.
  if (!shardState_ || sharding_ || (model_.model_parallel() && !model_.partitioned())) return;
  sharding_ = std::make_unique<adapter::OptimizerSharding>(*optimizer_, model_.group(), model_.local_parameters(),
                                                          /*dropOthers=*/model_.model_parallel());
}

void DistributedOptimizer::shareHostIfReady() {
  if (!hostSharedWanted_ || hostShared_ || hostSharedDecided_ || !sharding_) return;
  adapter::GradientReducer* reducer = model_.impl_->reducer.get();
  std::string why = model_.model_parallel() || !reducer ? "model parallelism (host sharing is for data parallelism)"
                                                          : adapter::HostSharedState::whyNot(
                                                                *optimizer_, *reducer, *sharding_, model_.group(),
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
  if (model_.model_parallel()) {
    // Each stage's gradients are on its dp_size() replicas, which hold the same averages.
    world().allreduce(&sumSq, &sumSq, 1, DType::kFloat64, ReduceOp::kSum);
    sumSq /= model_.dp_size();
  }
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

void DistributedOptimizer::step() {
  model_.finish_gradient_sync();
  if (shardState_) {
    shardIfReady();
    shareHostIfReady();
    if (hostShared_) {
      const std::string change = hostShared_->firstChange(*optimizer_, model_.local_parameters());
      detail::agreeOrThrow(change.empty(), change + " (build the DistributedOptimizer after the last change)",
                           "dataparallel.shard_optimizer_state=true: the parameter set changed after the optimizer "
                           "state was sharded:");
    } else {
      sharding_->checkUnchanged(*optimizer_, model_.local_parameters());  // collective: all ranks throw together
    }
  }
  observe::Observers& obs = observers();
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
  obs.optimizerStep(model_.impl_->lastStepGlobal, observe::spanSince(startUs));
}

namespace {
pipeline::Topology jobTopology() {
  const config::ModelParallelConfig& mp = runtime::jobConfig().modelParallel;
  return pipeline::makeTopology(size(), mp.enabled ? mp.partitions : 1, pipeline::parsePlacement(mp.placementStrategy));
}
}  // namespace

int dp_rank() { return jobTopology().dpRankOf.at(static_cast<size_t>(rank())); }
int dp_size() { return jobTopology().dataParallelSize; }
int pp_rank() { return jobTopology().ppRankOf.at(static_cast<size_t>(rank())); }
int pp_size() { return jobTopology().partitions; }
double scale_lr(double baseLr) { return baseLr * dp_size(); }

}  // namespace strata
