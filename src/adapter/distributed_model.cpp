#include "strata/distributed_model.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/types.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <mutex>

#include <thread>

#include "collectives/bucket_assignment.h"
#include "debugger/naming.h"
#include "debugger/torch_hook.h"
#include "profiler/session.h"
#include "core/errors.h"
#include "core/logging.h"
#include "pipeline/adapter/engine.h"
#include "runtime/runtime_internal.h"
#include "strata/runtime.h"
#include "strata/tensor_ops.h"
#include "adapter/model_signature.h"
#include "adapter/layer_instrumentation.h"  // [instrumentation] per-layer debugger/profiler data
#include "adapter/layer_list_model.h"

namespace strata {
namespace {

constexpr double kBytesPerMb = 1024.0 * 1024.0;

// A parameter whose gradient is synchronised, and where its gradient lives.
struct GradSlot {
  std::string name;
  torch::Tensor param;
  int bucket = -1;
  int64_t offset = 0;  // elements into the bucket
  std::shared_ptr<torch::autograd::Node> accumulator;
  uintptr_t hookKey = 0;
};

struct BucketState {
  torch::Tensor flat;             // the gradients of its parameters, back to back
  std::vector<int> slots;
  int pending = 0;                // gradients not yet produced in this backward
  bool launched = false;
  std::shared_ptr<Work> work;
  torch::Tensor wire;             // low-precision copy when gradient_dtype is 16-bit
  int64_t launchUs = -1;          // [instrumentation] profiler clock at launch (-1: timeline off)
};

// The process's debugger hook, created by the first DistributedModel when the job config
// has debugger collections; flushed, closed and end-marked at strata::finalize().
debugger::TorchHook* debuggerHook() {
  static std::unique_ptr<debugger::TorchHook> hook;
  static bool decided = false;
  if (decided) return hook.get();
  decided = true;
  const config::JobConfig& cfg = runtime::jobConfig();
  if (!cfg.debugger.enabled()) return nullptr;
  debugger::HookOptions options;
  options.outputDir = cfg.outputDir;
  options.rank = rank();
  options.worldSize = size();
  hook = std::make_unique<debugger::TorchHook>(cfg.debugger, options);
  debugger::setActiveHook(hook.get());
  runtime::addFinalizer([outputDir = cfg.outputDir] {
    debugger::setActiveHook(nullptr);
    hook->close(/*writeEndMarker=*/false);
    // Every worker's files are published before the end marker.
    runtime::arriveAtFinalize("debugger");
    if (rank() == 0) debugger::writeEndMarker(outputDir);
    hook.reset();
    decided = false;
  });
  return hook.get();
}

c10::ScalarType wireType(const std::string& gradientDtype) {
  if (gradientDtype == "bfloat16") return c10::ScalarType::BFloat16;
  if (gradientDtype == "float16") return c10::ScalarType::Half;
  return c10::ScalarType::Undefined;
}

}  // namespace

torch::Tensor StepOutput::reduce_mean() const {
  STRATA_CHECK(!outputs.empty(), "reduce_mean of a step that returned no outputs");
  std::vector<torch::Tensor> detached;
  for (const auto& t : outputs) detached.push_back(t.detach().to(torch::kFloat64));
  return torch::stack(detached).mean();
}

torch::Tensor StepOutput::reduce_sum() const {
  STRATA_CHECK(!outputs.empty(), "reduce_sum of a step that returned no outputs");
  std::vector<torch::Tensor> detached;
  for (const auto& t : outputs) detached.push_back(t.detach().to(torch::kFloat64));
  return torch::stack(detached).sum();
}

struct DistributedModel::Impl {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const torch::Tensor&)> forwardFn;
  bool forwardIsModulesOwn = false;  // forwardFn is module->forward (the module-holder constructors)
  DistributedModelOptions options;
  Group* group = nullptr;
  std::vector<GradSlot> slots;
  std::vector<torch::Tensor> buffers;
  std::vector<BucketState> buckets;
  size_t nextToLaunch = 0;
  bool syncEnabled = true;
  bool backwardActive = false;  // a hook fired since the last finish
  bool rebuilt = false;
  std::vector<int> readyOrder;  // observed in the first synchronised backward
  c10::ScalarType wire = c10::ScalarType::Undefined;
  DistributedModel::Stats stats;
  int64_t stepCount = 0;

  // Model parallelism (null in data-parallel mode): see pipelineStep.
  std::unique_ptr<pipeline::Engine> engine;
  uint64_t seedBase = 0;  // world rank 0's generator seed: per-layer dropout seeds
  int stepChunk = -1;     // inside the step function on the last stage: its chunk ...
  int stepMicrobatch = -1;  // ... and microbatch
  torch::Tensor stepLoss;   // what the step function passed to backward()
  pipeline::StepReport lastReport;
  std::vector<std::shared_ptr<void>> tieHandles;  // a LayerList model's shared accumulators

  void collectParameters();
  void collectParameters(const std::vector<std::pair<std::string, torch::Tensor>>& named);
  void onPlanned();
  void reduceNow();
  void broadcastState();
  void buildBuckets(const std::vector<int>& order);
  void registerHooks();
  void onGradReady(int slot);
  void launch(size_t bucket);
  void finish();
  void maybeRebuild();
};

void DistributedModel::Impl::collectParameters() {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& p : module->named_parameters(/*recurse=*/true)) named.emplace_back(p.key(), p.value());
  collectParameters(named);
  for (const auto& b : module->named_buffers(/*recurse=*/true)) buffers.push_back(b.value());
}

void DistributedModel::Impl::collectParameters(const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  for (const auto& [name, param] : adapter::uniqueTensors(named)) {
    if (!param.requires_grad()) continue;  // frozen: nothing to synchronise
    STRATA_CHECK(param.is_contiguous(), "DistributedModel: parameter ", name, " is not contiguous");
    STRATA_CHECK(param.device().is_cpu(), "DistributedModel: parameter ", name, " is on ", param.device().str(),
                 "; this build supports CPU tensors");
    GradSlot slot;
    slot.name = name;
    slot.param = param;
    slots.push_back(std::move(slot));
  }
}

// Model parallel, after the first step's plan: this rank's stages are known. Their
// gradients are reduced across the stage's data-parallel replicas with the same buckets
// as data parallelism (hooks armed for the rank's last backward; the rest at
// kReduceGradients).
void DistributedModel::Impl::onPlanned() {
  buffers.clear();
  for (const auto& b : engine->localBuffers()) buffers.push_back(b.second);
  if (!engine->dataParallelGroup()) return;
  group = engine->dataParallelGroup();
  collectParameters(engine->localParameters());
  syncEnabled = false;
  buildBuckets({});
  registerHooks();
}

void DistributedModel::Impl::reduceNow() {
  if (buckets.empty()) return;
  if (!backwardActive) {  // no hook fired (the last backward's chunk has no parameters)
    backwardActive = true;
    for (auto& b : buckets) b.launched = false;
    nextToLaunch = 0;
  }
  finish();
}

void DistributedModel::Impl::broadcastState() {
  torch::NoGradGuard noGrad;
  for (const auto& p : module->parameters(/*recurse=*/true)) {
    torch::Tensor t = p.detach();
    broadcast(t, 0, group);
  }
  for (auto& b : buffers) broadcast(b, 0, group);
}

void DistributedModel::Impl::buildBuckets(const std::vector<int>& order) {
  std::vector<collectives::ParamInfo> infos;
  for (const auto& s : slots)
    infos.push_back({static_cast<size_t>(s.param.numel()) * s.param.element_size(), toDType(s.param.scalar_type())});
  const auto plan = collectives::assignBuckets(infos, order, static_cast<size_t>(options.firstBucketMb * kBytesPerMb),
                                               static_cast<size_t>(options.bucketCapMb * kBytesPerMb));
  std::vector<BucketState> fresh(plan.size());
  for (size_t b = 0; b < plan.size(); ++b) {
    int64_t numel = 0;
    for (int s : plan[b].params) numel += slots[s].param.numel();
    fresh[b].flat = torch::zeros({numel}, slots[plan[b].params.at(0)].param.options().requires_grad(false));
    int64_t offset = 0;
    for (int s : plan[b].params) {
      GradSlot& slot = slots[s];
      torch::Tensor& flat = fresh[b].flat;
      // A fresh tensor over the bucket's storage (not an autograd view), so optimizers
      // may detach_() and zero_() it, and autograd accumulates into it in place.
      torch::Tensor grad = torch::from_blob(static_cast<char*>(flat.data_ptr()) + offset * flat.element_size(),
                                            slot.param.sizes(), [keep = flat](void*) {}, flat.options());
      torch::NoGradGuard noGrad;
      if (slot.param.grad().defined()) grad.copy_(slot.param.grad());
      slot.param.mutable_grad() = grad;
      slot.bucket = static_cast<int>(b);
      slot.offset = offset;
      fresh[b].slots.push_back(s);
      offset += slot.param.numel();
    }
    fresh[b].pending = static_cast<int>(fresh[b].slots.size());
  }
  buckets = std::move(fresh);
  nextToLaunch = 0;
}

void DistributedModel::Impl::registerHooks() {
  for (size_t i = 0; i < slots.size(); ++i) {
    GradSlot& slot = slots[i];
    slot.accumulator = torch::autograd::impl::grad_accumulator(slot.param);
    STRATA_CHECK(slot.accumulator != nullptr, "DistributedModel: no gradient accumulator for ", slot.name);
    const int index = static_cast<int>(i);
    slot.hookKey = slot.accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, index](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          onGradReady(index);
          return outputs;
        }));
  }
}

void DistributedModel::Impl::onGradReady(int index) {
  if (!syncEnabled) return;
  if (!backwardActive) {
    backwardActive = true;
    for (auto& b : buckets) {
      b.pending = static_cast<int>(b.slots.size());
      b.launched = false;
    }
    nextToLaunch = 0;
  }
  if (!rebuilt) readyOrder.push_back(index);
  BucketState& bucket = buckets[slots[index].bucket];
  if (--bucket.pending > 0) return;
  // Launch in bucket order on every rank, whatever order the buckets became ready in.
  while (nextToLaunch < buckets.size() && buckets[nextToLaunch].pending <= 0) launch(nextToLaunch++);
}

void DistributedModel::Impl::launch(size_t b) {
  BucketState& bucket = buckets[b];
  bucket.launched = true;
  bucket.launchUs = instrument::timelineNowUs();  // [instrumentation]
  torch::Tensor& data = bucket.flat;
  if (wire != c10::ScalarType::Undefined && data.scalar_type() == torch::kFloat32) {
    bucket.wire = data.to(wire);
    bucket.work = allreduceAsync(bucket.wire, ReduceOp::kAvg, group);
  } else {
    bucket.work = allreduceAsync(data, ReduceOp::kAvg, group);
  }
}

void DistributedModel::Impl::finish() {
  if (!backwardActive) return;
  // Parameters unused in this step never fired: their (zero or accumulated) gradients
  // are reduced with the rest.
  while (nextToLaunch < buckets.size()) launch(nextToLaunch++);
  const auto waitStart = std::chrono::steady_clock::now();
  instrument::GradientSyncTimer syncTimer;  // [instrumentation] AllReduce slices in the timeline
  for (auto& b : buckets) {
    if (b.work) {
      b.work->wait();
      stats.allreduceSeconds += std::chrono::duration<double>(b.work->runTime()).count();
      stats.bytesReduced += static_cast<int64_t>(b.wire.defined() ? b.wire.nbytes() : b.flat.nbytes());
      syncTimer.add(b.launchUs, b.work->runTime(), b.wire.defined() ? b.wire.nbytes() : b.flat.nbytes());
    }
    b.work.reset();
    if (b.wire.defined()) {
      torch::NoGradGuard noGrad;
      b.flat.copy_(b.wire);
      b.wire = torch::Tensor();
    }
  }
  stats.exposedSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - waitStart).count();
  ++stats.steps;
  backwardActive = false;
  maybeRebuild();
}

void DistributedModel::Impl::maybeRebuild() {
  if (rebuilt) return;
  rebuilt = true;
  // Rank 0's observed order decides for everyone, so buckets stay identical across ranks.
  std::vector<int64_t> order(slots.size(), -1);
  for (size_t i = 0; i < readyOrder.size() && i < order.size(); ++i) order[i] = readyOrder[i];
  group->broadcast(order.data(), order.size(), DType::kInt64, 0);
  std::vector<int> sequence;
  std::vector<bool> seen(slots.size(), false);
  for (int64_t v : order)
    if (v >= 0 && !seen[v]) {
      sequence.push_back(static_cast<int>(v));
      seen[v] = true;
    }
  for (size_t i = slots.size(); i-- > 0;)  // unused parameters: reverse registration order
    if (!seen[i]) sequence.push_back(static_cast<int>(i));
  readyOrder.clear();
  buildBuckets(sequence);
  STRATA_LOG(kInfo, kColl, "DistributedModel: rebuilt ", buckets.size(), " gradient buckets from the observed order");
}

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

namespace {
config::ModelParallelConfig modelParallelConfig(const DistributedModelOptions& options) {
  if (options.modelParallel.empty()) return runtime::jobConfig().modelParallel;
  return config::parseJobConfig("{\"modelparallel\": " + options.modelParallel + "}",
                                "DistributedModelOptions::modelParallel")
      .modelParallel;
}
}  // namespace

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
  m.wire = wireType(options.gradientDtype);
  // Intra-op threads: the host's cores shared among its ranks.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(std::max(1, cores / std::max(1, local_size())));
  const config::ModelParallelConfig mp = modelParallelConfig(options);
  if (mp.enabled) {
    STRATA_CHECK_WITH(ConfigError, sequential != nullptr, "/modelparallel/enabled: ",
                      pipeline::notASequentialMessage(*m.module));
    // Checked before any collective, so a bad config fails on every rank alike.
    m.engine = std::make_unique<pipeline::Engine>(pipeline::layersOf(*sequential), m.module, mp, rank(), size());
    if (options.checkModelsMatch) detail::checkModelsMatch(world(), detail::describeModel(*m.module));
    m.group = &world();
    m.broadcastState();  // every replica and stage starts from world rank 0's weights
    int64_t seed = static_cast<int64_t>(at::detail::getDefaultCPUGenerator().current_seed());
    world().broadcast(&seed, 1, DType::kInt64, 0);
    m.seedBase = static_cast<uint64_t>(seed);
    m.group = m.engine->dataParallelGroup() ? m.engine->dataParallelGroup() : &world();
    STRATA_LOG(kInfo, kPipe, "DistributedModel: model parallel, ", mp.partitions, " partition(s) x ",
               m.engine->dpSize(), " replica(s), pp_rank ", m.engine->ppRank(), " dp_rank ", m.engine->dpRank(),
               ", ", mp.pipeline, " schedule, ", mp.microbatches, " microbatch(es)");
    return;
  }
  if (options.checkModelsMatch) detail::checkModelsMatch(*m.group, detail::describeModel(*m.module));
  m.collectParameters();
  m.broadcastState();
  m.buildBuckets({});
  m.registerHooks();
  // The debugger hook exists before the first step, so a checkpoint can restore its counters.
  debuggerHook();
  STRATA_LOG(kInfo, kColl, "DistributedModel: ", m.slots.size(), " synchronised parameters in ", m.buckets.size(),
             " buckets (cap ", options.bucketCapMb, " MB, gradient dtype ",
             options.gradientDtype.empty() ? "float32" : options.gradientDtype, ")");
}

DistributedModel::DistributedModel(const LayerList& layers, const torch::Tensor& exampleBatch,
                                   DistributedModelOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.forwardIsModulesOwn = true;
  const config::ModelParallelConfig mp = modelParallelConfig(options);
  auto builder = std::make_shared<pipeline::ModelBuilder>(layers, adapter::worldModelSeed(world()));
  if (!mp.enabled) {
    adapter::WholeModel whole = adapter::buildWholeModel(*builder, options.group ? *options.group : world());
    m.tieHandles = std::move(whole.tieHandles);
    init(whole.root.ptr(), [root = whole.root.ptr()](const torch::Tensor& x) { return root->forward(x); },
         std::move(options), &whole.root);
    return;
  }
  STRATA_CHECK_WITH(ConfigError,
                    exampleBatch.dim() >= 1 && exampleBatch.size(0) >= mp.microbatches &&
                        exampleBatch.size(0) % mp.microbatches == 0,
                    "/modelparallel/microbatches: ", mp.microbatches, " microbatches do not divide the example batch of ",
                    exampleBatch.dim() >= 1 ? exampleBatch.size(0) : 0, " samples");
  m.engine = std::make_unique<pipeline::Engine>(builder, mp, rank(), size());
  m.group = &world();
  const config::JobConfig& cfg = runtime::jobConfig();
  if (options.bucketCapMb <= 0) options.bucketCapMb = cfg.dataParallel.bucketCapMb;
  if (options.gradientDtype.empty()) options.gradientDtype = cfg.dataParallel.gradientDtype;
  m.options = options;
  m.wire = wireType(options.gradientDtype);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(std::max(1, cores / std::max(1, local_size())));  // as init() does
  m.seedBase = builder->modelSeed();
  m.engine->makePlan(exampleBatch.narrow(0, 0, exampleBatch.size(0) / mp.microbatches), world());
  m.module = m.engine->model();
  m.forwardFn = [root = m.module](const torch::Tensor& x) { return root->as<torch::nn::Sequential>()->forward(x); };
  m.group = m.engine->dataParallelGroup() ? m.engine->dataParallelGroup() : &world();
  m.onPlanned();
  STRATA_LOG(kInfo, kPipe, "DistributedModel: model parallel (LayerList), ", mp.partitions, " partition(s) x ",
             m.engine->dpSize(), " replica(s), pp_rank ", m.engine->ppRank(), " dp_rank ", m.engine->dpRank());
}

DistributedModel::~DistributedModel() {
  for (auto& slot : impl_->slots)
    if (slot.accumulator) slot.accumulator->del_post_hook(slot.hookKey);
  try {
    for (auto& b : impl_->buckets)
      if (b.work) b.work->wait();
  } catch (const std::exception& e) {
    STRATA_LOG(kWarn, kColl, "DistributedModel: gradient AllReduce failed during destruction: ", e.what());
  }
}

torch::Tensor DistributedModel::forward(const torch::Tensor& input) {
  Impl& m = *impl_;
  if (m.engine) {  // model parallel: a stage inside step(), else the whole pipeline (evaluation)
    if (m.stepChunk >= 0) return m.engine->forwardChunk(m.stepChunk, m.stepMicrobatch, input);
    if (!m.engine->planned()) {  // evaluation before training: plan on (part of) this input
      const int64_t sample = std::max<int64_t>(1, input.size(0) / m.engine->config().microbatches);
      m.engine->makePlan(input.narrow(0, 0, std::min(sample, input.size(0))), world());
      m.onPlanned();
    }
    return m.engine->inference(input);
  }
  if (m.options.broadcastBuffers && m.module->is_training() && !m.buffers.empty()) {
    torch::NoGradGuard noGrad;
    for (auto& b : m.buffers) broadcast(b, 0, m.group);
  }
  // [instrumentation] per-layer inputs/outputs and timeline when the debugger or profiler wants them
  return instrument::forward(*m.module, m.forwardFn, input, m.forwardIsModulesOwn);
}

void DistributedModel::backward(const torch::Tensor& loss) {
  if (impl_->engine) {
    STRATA_CHECK(impl_->stepChunk >= 0, "model parallel: backward() is called inside the step function of step()");
    impl_->stepLoss = loss;  // the executor runs it when the schedule says
    return;
  }
  loss.backward();
  finish_gradient_sync();
}

StepOutput DistributedModel::step(const torch::Tensor& data, const torch::Tensor& target, const StepFn& fn) {
  if (impl_->engine) return pipelineStep(data, target, fn);
  profiler::Session* prof = profiler::current();
  const int64_t step = impl_->stepCount++;
  if (prof) prof->stepBegin(step);
  debugger::TorchHook* hook = debuggerHook();
  if (hook && hook->beginStep(impl_->module->is_training() ? debugger::Mode::kTrain : debugger::Mode::kEval))
    hook->saveParameters(*impl_->module);
  StepOutput out;
  out.outputs.push_back(fn(*this, data, target));
  finish_gradient_sync();
  if (hook) hook->saveLoss(out.reduce_mean());
  if (prof) prof->stepEnd(step);
  return out;
}

// Model parallel: one step of this rank's pipeline program. The executor calls back into
// the step function on the last stage (m(x) = the stage's forward, m.backward(loss) records
// the loss) and into the data-parallel buckets (armed for this rank's last backward, reduced
// at kReduceGradients).
StepOutput DistributedModel::pipelineStep(const torch::Tensor& data, const torch::Tensor& target, const StepFn& fn) {
  Impl& m = *impl_;
  const config::ModelParallelConfig& mp = m.engine->config();
  STRATA_CHECK_WITH(ConfigError, data.dim() >= 1 && data.size(0) % mp.microbatches == 0 && data.size(0) > 0,
                    "/modelparallel/microbatches: ", mp.microbatches, " microbatches do not divide the batch of ",
                    data.dim() >= 1 ? data.size(0) : 0, " samples");
  STRATA_CHECK_WITH(ConfigError, target.dim() >= 1 && target.size(0) == data.size(0), "step(): the target's batch (",
                    target.dim() >= 1 ? target.size(0) : 0, ") differs from the data's (", data.size(0), ")");
  if (!m.engine->planned()) {
    m.engine->makePlan(data.narrow(0, 0, data.size(0) / mp.microbatches), world());
    m.onPlanned();
  }
  profiler::Session* prof = profiler::current();
  const int64_t step = m.stepCount++;
  if (prof) prof->stepBegin(step);
  debugger::TorchHook* hook = debuggerHook();
  // Each rank saves what it owns: its stages' parameters and gradients, and on the last
  // stage the loss (smdebug's names, so the default collections and rules apply).
  if (hook && hook->beginStep(m.module->is_training() ? debugger::Mode::kTrain : debugger::Mode::kEval))
    hook->saveParameters(debugger::moduleClassName(m.module->name()), m.engine->localParameters());

  pipeline::StepInputs in;
  in.data = data;
  in.target = target;
  in.microbatches = mp.microbatches;
  in.step = step;
  if (m.module->is_training()) in.seedBase = m.seedBase;
  const int lastChunk = m.engine->localChunks() - 1;
  in.lastStage = [&](int microbatch, const torch::Tensor& x, const torch::Tensor& y) {
    m.stepChunk = lastChunk;
    m.stepMicrobatch = microbatch;
    m.stepLoss = torch::Tensor();
    struct Reset {
      Impl& m;
      ~Reset() { m.stepChunk = m.stepMicrobatch = -1; }
    } reset{m};
    torch::Tensor result = fn(*this, x, y);
    return std::make_pair(result, m.stepLoss);
  };
  if (!m.buckets.empty()) {
    m.syncEnabled = false;
    in.beforeBackward = [&](int chunk, int microbatch) {
      if (std::make_pair(chunk, microbatch) == m.engine->lastBackward()) m.syncEnabled = true;
    };
    in.reduceGradients = [&] { m.reduceNow(); };
  }
  // Per-layer seeding moves the default generator; code outside step() must not see it.
  auto generator = at::detail::getDefaultCPUGenerator();
  torch::Tensor rngState;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    rngState = generator.get_state();
  }
  try {
    m.lastReport = m.engine->step(std::move(in));
  } catch (...) {
    m.syncEnabled = false;
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(rngState);
    throw;
  }
  m.syncEnabled = false;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(rngState);
  }
  StepOutput out;
  out.outputs = m.engine->shareOutputs(m.lastReport.outputs);
  if (hook && m.engine->ppRank() == m.engine->ppSize() - 1) hook->saveLoss(out.reduce_mean());
  if (prof) prof->stepEnd(step);
  return out;
}

PipelineStats DistributedModel::pipeline_stats() const {
  PipelineStats s;
  if (!impl_->engine || !impl_->engine->planned()) return s;
  const pipeline::StepReport& r = impl_->lastReport;
  s.stepSeconds = r.totalSeconds;
  s.computeSeconds = r.computeSeconds;
  s.recvWaitSeconds = r.recvWaitSeconds;
  s.peakInFlight = r.peakInFlight;
  s.peakStashBytes = r.peakStashBytes;
  const pipeline::PipelinePlan& plan = impl_->engine->plan();
  s.predictedStepSeconds = plan.simulation.stepSeconds;
  s.predictedBubble = plan.simulation.bubbleFraction;
  for (const auto& stage : plan.partition.stages) s.stageFirstLayer.push_back(stage.firstLayer);
  s.plan = pipeline::formatPlan(plan);
  s.predictedStaticBytes =
      static_cast<int64_t>(impl_->engine->predictedRankBytes().at(static_cast<size_t>(impl_->engine->ppRank())));
  return s;
}

void DistributedModel::finish_gradient_sync() { impl_->finish(); }

void DistributedModel::zero_grad() {
  finish_gradient_sync();
  if (impl_->engine && impl_->buckets.empty()) {  // model parallel without replicas: plain gradients
    torch::NoGradGuard noGrad;
    for (auto& p : impl_->module->parameters(true))
      if (p.grad().defined()) p.mutable_grad().zero_();
    return;
  }
  torch::NoGradGuard noGrad;
  for (auto& b : impl_->buckets) b.flat.zero_();
  for (auto& slot : impl_->slots) {
    // The user (or an optimizer) may have replaced the gradient tensor: re-point it at the bucket.
    const BucketState& b = impl_->buckets[slot.bucket];
    if (!slot.param.grad().defined() || slot.param.grad().data_ptr() !=
                                            static_cast<char*>(b.flat.data_ptr()) + slot.offset * b.flat.element_size()) {
      torch::Tensor flat = b.flat;
      slot.param.mutable_grad() = torch::from_blob(static_cast<char*>(flat.data_ptr()) + slot.offset * flat.element_size(),
                                                   slot.param.sizes(), [keep = flat](void*) {}, flat.options());
    }
  }
}

std::vector<torch::Tensor> DistributedModel::parameters() const {
  return adapter::uniqueTensors(impl_->module->parameters(true));
}

std::vector<torch::Tensor> DistributedModel::local_parameters() const {
  if (!impl_->engine || !impl_->engine->planned()) return parameters();
  std::vector<torch::Tensor> out;
  for (auto& p : adapter::uniqueTensors(impl_->engine->localParameters())) out.push_back(p.second);
  return out;
}

torch::OrderedDict<std::string, torch::Tensor> DistributedModel::local_state_dict() const {
  torch::OrderedDict<std::string, torch::Tensor> out;
  if (impl_->engine && impl_->engine->planned()) {
    for (auto& p : impl_->engine->localParameters()) out.insert(p.first, p.second);
    for (auto& b : impl_->engine->localBuffers()) out.insert(b.first, b.second);
    return out;
  }
  for (const auto& p : impl_->module->named_parameters(true)) out.insert(p.key(), p.value());
  for (const auto& b : impl_->module->named_buffers(true)) out.insert(b.key(), b.value());
  return out;
}

bool DistributedModel::model_parallel() const { return impl_->engine != nullptr; }
bool DistributedModel::partitioned() const { return impl_->engine && impl_->engine->planned(); }
int DistributedModel::pp_rank() const { return impl_->engine ? impl_->engine->ppRank() : 0; }
int DistributedModel::pp_size() const { return impl_->engine ? impl_->engine->ppSize() : 1; }
int DistributedModel::dp_rank() const { return impl_->engine ? impl_->engine->dpRank() : impl_->group->rank(); }
int DistributedModel::dp_size() const { return impl_->engine ? impl_->engine->dpSize() : impl_->group->size(); }
std::shared_ptr<torch::nn::Module> DistributedModel::module() const { return impl_->module; }
Group& DistributedModel::group() const { return *impl_->group; }
void DistributedModel::train(bool on) { impl_->module->train(on); }
DistributedModel::Stats DistributedModel::stats() const { return impl_->stats; }
void DistributedModel::reset_stats() { impl_->stats = Stats{}; }
size_t DistributedModel::num_buckets() const { return impl_->buckets.size(); }
bool DistributedModel::buckets_rebuilt() const { return impl_->rebuilt; }
int64_t DistributedModel::steps_taken() const { return impl_->stepCount; }
void DistributedModel::set_steps_taken(int64_t steps) { impl_->stepCount = steps; }

DistributedModel::NoSync::NoSync(DistributedModel& model) : model_(model), previous_(model.impl_->syncEnabled) {
  model_.finish_gradient_sync();
  model_.impl_->syncEnabled = false;
}

DistributedModel::NoSync::~NoSync() { model_.impl_->syncEnabled = previous_; }

DistributedOptimizer::DistributedOptimizer(std::unique_ptr<torch::optim::Optimizer> optimizer, DistributedModel& model)
    : optimizer_(std::move(optimizer)), model_(model) {}

void DistributedOptimizer::zero_grad() { model_.zero_grad(); }

void DistributedOptimizer::step() {
  model_.finish_gradient_sync();
  // Gradients as the optimizer sees them: after the AllReduce, before the update.
  if (debugger::TorchHook* hook = debuggerHook()) {
    if (model_.partitioned()) {  // this rank's stages only
      std::vector<std::pair<std::string, torch::Tensor>> local;
      for (const auto& item : model_.local_state_dict()) local.emplace_back(item.key(), item.value());
      hook->saveGradients(debugger::moduleClassName(model_.module()->name()), local);
    } else {
      hook->saveGradients(*model_.module());
    }
  }
  // Timed as part of the model's step that just ended (model.step() closes the profiler step).
  profiler::Session* prof = profiler::current();
  const int64_t startUs = prof ? prof->nowUs() : 0;
  optimizer_->step();
  if (prof)
    prof->recordForEndedStep(model_.steps_taken() - 1, "step", profiler::phases::kOptimizer,
                             profiler::Track::kCompute, startUs, prof->nowUs() - startUs);
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
