// DistributedModel: one strategy (parallelism.h: data parallel or a pipeline), chosen once at
// construction, does the work; this file numbers and observes the steps (observers.h, which
// every step's events go through) and forwards every call to the strategy.
#include "strata/distributed_model.h"

#include <ATen/Parallel.h>
#include <torch/types.h>

#include <optional>
#include <thread>

#include "adapter/dp/gradient_reducer.h"
#include "adapter/observe/observers.h"
#include "adapter/observe/step_modes.h"
#include "adapter/ops/unique_tensors.h"
#include "adapter/parallelism.h"
#include "core/affinity.h"
#include "core/errors.h"
#include "debugger/naming.h"
#include "runtime/launch.h"
#include "strata/runtime.h"

namespace strata {
namespace {

using observe::observers;

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
  std::unique_ptr<adapter::Parallelism> parallelism;
  int64_t stepCount = 0;  // step() calls: the pipeline's per-step seeds, checkpoints
  // Observed steps (smdebug's hook steps, adapter/observe/step_modes.h): evaluation and
  // prediction forwards outside step() are steps too.
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

  // The observers are registered once the strategy is built, before the first step, so a
  // checkpoint can restore the debugger's counters.
  void adopt(std::unique_ptr<adapter::Parallelism> chosen) {
    parallelism = std::move(chosen);
    observe::registerJobObservers();
  }
  torch::nn::Module& module() const { return *parallelism->module(); }
  Mode mode() const { return adapter::observedMode(modeOverride, module().is_training()); }
  // Opens an observed step of the current mode; returns its global step.
  int64_t beginObservedStep(observe::Observers& obs) {
    const Mode m = mode();
    const adapter::StepCounter::Numbers n = observedSteps.next(m);
    obs.stepBegin(n.global, m, n.modeStep);
    return n.global;
  }
  std::string topClass() const { return debugger::moduleClassName(module().name()); }
};

DistributedModel::DistributedModel(std::shared_ptr<torch::nn::Module> module,
                                   std::function<torch::Tensor(const torch::Tensor&)> forward,
                                   DistributedModelOptions options)
    : impl_(std::make_unique<Impl>()) {
  init(std::move(module), std::move(forward), std::move(options), nullptr, false);
}

DistributedModel::DistributedModel(ModulesOwnForward, std::shared_ptr<torch::nn::Module> module,
                                   std::function<torch::Tensor(const torch::Tensor&)> forward,
                                   DistributedModelOptions options)
    : impl_(std::make_unique<Impl>()) {
  init(std::move(module), std::move(forward), std::move(options), nullptr, true);
}

DistributedModel::DistributedModel(torch::nn::Sequential module, DistributedModelOptions options)
    : impl_(std::make_unique<Impl>()) {
  init(module.ptr(), [m = module.ptr()](const torch::Tensor& x) { return m->forward(x); }, std::move(options),
       &module, true);
}

void DistributedModel::init(std::shared_ptr<torch::nn::Module> module,
                            std::function<torch::Tensor(const torch::Tensor&)> forward, DistributedModelOptions options,
                            const torch::nn::Sequential* sequential, bool forwardIsModulesOwn) {
  setIntraOpThreads();
  adapter::ModelSource source;
  source.module = std::move(module);
  source.forward = std::move(forward);
  source.forwardIsModulesOwn = forwardIsModulesOwn;
  source.sequential = sequential;
  impl_->adopt(adapter::chooseParallelism(std::move(source), adapter::resolvedOptions(std::move(options))));
}

DistributedModel::DistributedModel(const LayerList& layers, const torch::Tensor& exampleBatch,
                                   DistributedModelOptions options)
    : impl_(std::make_unique<Impl>()) {
  setIntraOpThreads();
  impl_->adopt(adapter::chooseParallelism(layers, exampleBatch, adapter::resolvedOptions(std::move(options))));
}

DistributedModel::~DistributedModel() = default;

adapter::Parallelism& DistributedModel::parallelism() const { return *impl_->parallelism; }
int64_t DistributedModel::lastStepGlobal() const { return impl_->lastStepGlobal; }

torch::Tensor DistributedModel::forward(const torch::Tensor& input) {
  Impl& m = *impl_;
  if (!adapter::forwardIsItsOwnStep(m.inStep, m.mode())) return m.parallelism->forward(input);
  // Evaluation or prediction outside step(): each forward is one step of its mode, as each
  // top-level forward is for smdebug's hook (a TRAIN forward outside step() is not one).
  observe::Observers& obs = observers();
  const Impl::StepScope scope(m);
  const int64_t global = m.beginObservedStep(obs);
  if (obs.wantsTensors()) obs.parameters(m.topClass(), m.parallelism->localParameters());
  torch::Tensor out = m.parallelism->forward(input);
  obs.stepEnd(global);
  return out;
}

void DistributedModel::backward(const torch::Tensor& loss) { impl_->parallelism->backward(loss); }

StepOutput DistributedModel::step(const torch::Tensor& data, const torch::Tensor& target, const StepFn& fn) {
  Impl& m = *impl_;
  m.parallelism->prepareStep(data);
  const int64_t step = m.stepCount++;
  observe::Observers& obs = observers();
  const Impl::StepScope scope(m);
  const int64_t global = m.beginObservedStep(obs);
  m.lastStepGlobal = global;
  if (obs.wantsTensors()) obs.parameters(m.topClass(), m.parallelism->localParameters());
  StepOutput out;
  out.outputs = m.parallelism->step(data, target, step,
                                    [this, &fn](const torch::Tensor& x, const torch::Tensor& y) { return fn(*this, x, y); });
  if (m.parallelism->holdsLoss()) obs.loss(out.reduce_mean());  // a pipeline's loss lives on its last stage
  obs.stepEnd(global);
  return out;
}

PipelineStats DistributedModel::pipeline_stats() const { return impl_->parallelism->pipelineStats(); }

void DistributedModel::finish_gradient_sync() {
  if (adapter::GradientReducer* r = impl_->parallelism->reducer()) r->finish();
}

void DistributedModel::zero_grad() { impl_->parallelism->zeroGrad(); }

std::vector<torch::Tensor> DistributedModel::parameters() const {
  return adapter::uniqueTensors(impl_->module().parameters(true));
}

std::vector<torch::Tensor> DistributedModel::local_parameters() const {
  std::vector<torch::Tensor> out;
  for (auto& p : adapter::uniqueTensors(impl_->parallelism->localParameters())) out.push_back(p.second);
  return out;
}

torch::OrderedDict<std::string, torch::Tensor> DistributedModel::local_state_dict() const {
  torch::OrderedDict<std::string, torch::Tensor> out;
  for (auto& p : impl_->parallelism->localParameters()) out.insert(p.first, p.second);
  for (auto& b : impl_->parallelism->localBuffers()) out.insert(b.first, b.second);
  return out;
}

bool DistributedModel::model_parallel() const { return impl_->parallelism->modelParallel(); }
bool DistributedModel::partitioned() const {
  return impl_->parallelism->modelParallel() && impl_->parallelism->partitioned();
}
int DistributedModel::pp_rank() const { return impl_->parallelism->ppRank(); }
int DistributedModel::pp_size() const { return impl_->parallelism->ppSize(); }
int DistributedModel::dp_rank() const { return impl_->parallelism->dpRank(); }
int DistributedModel::dp_size() const { return impl_->parallelism->dpSize(); }
std::shared_ptr<torch::nn::Module> DistributedModel::module() const { return impl_->parallelism->module(); }
Group& DistributedModel::group() const { return impl_->parallelism->group(); }
void DistributedModel::train(bool on) {
  impl_->module().train(on);
  impl_->modeOverride.reset();
}

DistributedModel::Stats DistributedModel::stats() const {
  Stats s;
  if (const adapter::GradientReducer* r = impl_->parallelism->reducer()) {
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
  if (adapter::GradientReducer* r = impl_->parallelism->reducer()) r->resetStats();
}
size_t DistributedModel::num_buckets() const {
  const adapter::GradientReducer* r = impl_->parallelism->reducer();
  return r ? r->numBuckets() : 0;
}
bool DistributedModel::buckets_rebuilt() const {
  const adapter::GradientReducer* r = impl_->parallelism->reducer();
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
  if (adapter::GradientReducer* r = model_.impl_->parallelism->reducer()) {
    previous_ = r->enabled();
    r->setEnabled(false);
  }
}

DistributedModel::NoSync::~NoSync() {
  if (adapter::GradientReducer* r = model_.impl_->parallelism->reducer()) r->setEnabled(previous_);
}

}  // namespace strata
