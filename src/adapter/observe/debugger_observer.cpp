// The debugger as a step observer: parameters, the loss, gradients and module inputs/
// outputs go to the rank's TorchHook (src/debugger/torch_hook.h), which checks each name
// against the due collections before converting anything.
#include <mutex>
#include <unordered_map>

#include "adapter/observe/job_observers.h"
#include "adapter/observe/layer_instrumentation.h"
#include "core/logging.h"
#include "debugger/torch_hook.h"
#include "runtime/runtime_internal.h"
#include "strata/runtime.h"

namespace strata::observe {
namespace {

class DebuggerObserver final : public StepObserver {
 public:
  DebuggerObserver(const config::DebuggerConfig& config, debugger::HookOptions options)
      : hook_(config, std::move(options)) {}

  debugger::TorchHook& hook() { return hook_; }

  // Capture the layers of the first forward of each global step while a collection is due
  // (gradient-accumulation microbatches and evaluation passes between steps do not write a
  // name twice).
  bool wantsLayerTensors(const void* model) override {
    if (!hook_.writes() || !hook_.core().anythingDue()) return false;
    const int64_t step = hook_.core().globalStep();
    std::lock_guard<std::mutex> lock(mu_);
    int64_t& last = lastCapturedStep_.try_emplace(model, -1).first->second;
    if (!instrument::captureThisForward(true, step, last)) return false;
    last = step;
    return true;
  }

  bool wantsTensors() const override { return hook_.writes() && hook_.core().anythingDue(); }

  void stepBegin(int64_t /*step*/, Mode mode, int64_t /*modeStep*/) override { hook_.beginStep(mode); }
  void parameters(const std::string& topClass, const NamedTensors& params) override {
    hook_.saveParameters(topClass, params);
  }
  void loss(const torch::Tensor& loss) override { hook_.saveLoss(loss); }
  void gradients(const std::string& topClass, const NamedTensors& params) override {
    hook_.saveGradients(topClass, params);
  }
  void moduleInput(const std::string& path, const torch::Tensor& input) override {
    hook_.saveModuleInputs(path, {input});
  }
  void moduleOutput(const std::string& path, const torch::Tensor& output) override {
    hook_.saveModuleOutputs(path, {output});
  }

 private:
  debugger::TorchHook hook_;
  std::mutex mu_;
  std::unordered_map<const void*, int64_t> lastCapturedStep_;
};

}  // namespace

std::shared_ptr<StepObserver> makeDebuggerObserver(const config::DebuggerConfig& config, const std::string& outputDir,
                                                   int rank, int worldSize) {
  debugger::HookOptions options;
  options.outputDir = outputDir;
  options.rank = rank;
  options.worldSize = worldSize;
  return makeDebuggerObserver(config, std::move(options));
}

std::shared_ptr<StepObserver> makeDebuggerObserver(const config::DebuggerConfig& config,
                                                   debugger::HookOptions options) {
  auto observer = std::make_shared<DebuggerObserver>(config, std::move(options));
  debugger::setActiveHook(&observer->hook());
  return observer;
}

void closeDebuggerObserver(StepObserver& debuggerObserver, const std::string& outputDir) {
  auto& observer = static_cast<DebuggerObserver&>(debuggerObserver);
  try {
    debugger::setActiveHook(nullptr);
    observer.hook().close(/*writeEndMarker=*/false);
  } catch (const std::exception& e) {
    STRATA_LOG(kWarn, kAllSubsys, "debugger: closing the hook failed: ", e.what());
  }
  // Every worker's files are published before the end marker.
  runtime::arriveAtFinalize("debugger");
  if (strata::rank() == 0) debugger::writeEndMarker(outputDir);
}

}  // namespace strata::observe
