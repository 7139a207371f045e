#include "adapter/observe/observers.h"

#include <atomic>

#include "adapter/observe/job_observers.h"
#include "core/logging.h"
#include "runtime/runtime_internal.h"
#include "strata/runtime.h"

namespace strata::observe {

const char* transferName(Transfer::Kind kind) {
  switch (kind) {
    case Transfer::Kind::kSendActivation: return "send activation";
    case Transfer::Kind::kSendGradient: return "send gradient";
    case Transfer::Kind::kRecvActivation: return "recv activation";
    case Transfer::Kind::kRecvGradient: return "recv gradient";
  }
  return "transfer";
}

Observers::Observers() { publish(std::make_unique<List>()); }

void Observers::publish(std::unique_ptr<List> next) {
  list_.store(next.get(), std::memory_order_release);
  lists_.push_back(std::move(next));
}

void Observers::add(std::shared_ptr<StepObserver> observer) {
  std::lock_guard<std::mutex> lock(mu_);
  auto next = std::make_unique<List>(snapshot());
  next->push_back(std::move(observer));
  publish(std::move(next));
}

void Observers::remove(const StepObserver* observer) {
  std::lock_guard<std::mutex> lock(mu_);
  auto next = std::make_unique<List>();
  for (const auto& o : snapshot())
    if (o.get() != observer) next->push_back(o);
  publish(std::move(next));
}

template <typename Fn>
void Observers::each(const char* event, Fn&& fn) const {
  for (const auto& o : snapshot()) {
    try {
      fn(*o);
    } catch (const std::exception& e) {
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true))
        STRATA_LOG(kWarn, kAllSubsys, "a step observer failed in ", event, " (training goes on): ", e.what());
    }
  }
}

bool Observers::timing() const {
  for (const auto& o : snapshot())
    if (o->timing()) return true;
  return false;
}

bool Observers::modelTiming() const {
  for (const auto& o : snapshot())
    if (o->modelTiming()) return true;
  return false;
}

int64_t Observers::nowUs() const {
  for (const auto& o : snapshot())
    if (o->timing()) return o->nowUs();
  return -1;
}

int64_t Observers::nowIfTiming() const { return nowUs(); }

int64_t Observers::clockUs() const {
  for (const auto& o : snapshot())
    if (const int64_t now = o->nowUs(); now >= 0) return now;
  return -1;
}

Interest Observers::interest(const void* model) {
  Interest interest;
  for (const auto& o : snapshot()) {
    interest.times = interest.times || o->timing();
    interest.modelTimes = interest.modelTimes || o->modelTiming();
    interest.layerTensors = o->wantsLayerTensors(model) || interest.layerTensors;
  }
  return interest;
}

bool Observers::wantsLayerTensors(const void* model) { return interest(model).layerTensors; }

bool Observers::wantsTensors() const {
  for (const auto& o : snapshot())
    if (o->wantsTensors()) return true;
  return false;
}

void Observers::stepBegin(int64_t step, Mode mode, int64_t modeStep) {
  each("stepBegin", [&](StepObserver& o) { o.stepBegin(step, mode, modeStep); });
}
void Observers::stepEnd(int64_t step) {
  each("stepEnd", [&](StepObserver& o) { o.stepEnd(step); });
}
void Observers::parameters(const std::string& topClass, const NamedTensors& params) {
  each("parameters", [&](StepObserver& o) { o.parameters(topClass, params); });
}
void Observers::loss(const torch::Tensor& loss) {
  each("loss", [&](StepObserver& o) { o.loss(loss); });
}
void Observers::gradients(const std::string& topClass, const NamedTensors& params) {
  each("gradients", [&](StepObserver& o) { o.gradients(topClass, params); });
}
void Observers::optimizerStep(int64_t step, Span span) {
  each("optimizerStep", [&](StepObserver& o) { o.optimizerStep(step, span); });
}
void Observers::batchRequested() {
  each("batchRequested", [&](StepObserver& o) { o.batchRequested(); });
}
void Observers::moduleInput(const std::string& path, const torch::Tensor& input) {
  each("moduleInput", [&](StepObserver& o) { o.moduleInput(path, input); });
}
void Observers::moduleOutput(const std::string& path, const torch::Tensor& output) {
  each("moduleOutput", [&](StepObserver& o) { o.moduleOutput(path, output); });
}
void Observers::layerForward(const std::string& path, Span span) {
  each("layerForward", [&](StepObserver& o) { o.layerForward(path, span); });
}
void Observers::chainForward(const LayerChain& chain, Span span) {
  each("chainForward", [&](StepObserver& o) { o.chainForward(chain, span); });
}
void Observers::layerBackward(const std::string& path, Span span) {
  each("layerBackward", [&](StepObserver& o) { o.layerBackward(path, span); });
}
void Observers::chainBackward(const std::string& topName, Span span) {
  each("chainBackward", [&](StepObserver& o) { o.chainBackward(topName, span); });
}
void Observers::gradientSync(Span wait, const std::vector<BucketRun>& buckets) {
  each("gradientSync", [&](StepObserver& o) { o.gradientSync(wait, buckets); });
}
void Observers::stageBackward(const StageWork& work) {
  each("stageBackward", [&](StepObserver& o) { o.stageBackward(work); });
}
void Observers::transfer(const Transfer& transfer) {
  each("transfer", [&](StepObserver& o) { o.transfer(transfer); });
}
void Observers::sendsWaited(Span span, int64_t sends) {
  each("sendsWaited", [&](StepObserver& o) { o.sendsWaited(span, sends); });
}

Observers& observers() {
  static Observers instance;
  return instance;
}

Span spanSince(int64_t startUs) {
  if (startUs < 0) return Span{-1, 0};
  const int64_t now = observers().clockUs();
  return Span{startUs, now >= startUs ? now - startUs : 0};
}

void registerJobObservers() {
  static bool registered = false;  // the training thread: DistributedModel construction
  if (registered) return;
  registered = true;
  std::shared_ptr<StepObserver> profiler = makeProfilerObserver();
  observers().add(profiler);
  const config::JobConfig& cfg = runtime::jobConfig();
  std::shared_ptr<StepObserver> debugger;
  if (cfg.debugger.enabled()) {
    debugger = makeDebuggerObserver(cfg.debugger, cfg.outputDir, rank(), size());
    observers().add(debugger);
  }
  runtime::addFinalizer([profiler, debugger, outputDir = cfg.outputDir] {
    observers().remove(profiler.get());
    if (debugger) {
      observers().remove(debugger.get());
      closeDebuggerObserver(*debugger, outputDir);
    }
    registered = false;
  });
}

}  // namespace strata::observe
