// The libtorch adapter of the debugger Hook, for the runtime's DistributedModel /
// DistributedOptimizer / pipeline executor (implemented in src/adapter/observe/debugger_hook.cpp; this
// header is the only one in src/debugger that needs ATen, and only torch-linked code may
// include it).
//
// Tensors are checked against the schedule and the collection regexes BEFORE any
// conversion, so steps that are not due cost one branch and device tensors are copied to
// the host only when saved. Saved values: detached, contiguous, on the CPU; dtypes as in
// debugger/types.h (bfloat16 -> float32, int8/int16 -> int32; complex and quantized types
// are skipped with a warning). Names follow smdebug's PyTorch hook (debugger/naming.h).
//
// Threading: as Hook (thread-safe, meant for the training thread).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "debugger/hook.h"

namespace torch::nn {
class Module;
}

namespace strata::debugger {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class TorchHook {
 public:
  TorchHook(const config::DebuggerConfig& config, HookOptions options);

  Hook& core() { return hook_; }
  const Hook& core() const { return hook_; }
  bool writes() const { return hook_.writes(); }
  bool beginStep(Mode mode) { return hook_.beginStep(mode); }
  void endStep() { hook_.endStep(); }
  bool wantsTensor(const std::string& name) { return hook_.wantsTensor(name); }

  // Saves `tensor` as `name` if a due collection selects it; returns whether it did.
  // Undefined tensors are skipped (returns false).
  bool saveTensor(const std::string& name, const at::Tensor& tensor);

  // Parameters as "<TopClass>_<path>" (weights, biases ...), the values this step's forward
  // uses: call before the forward pass. The Module overload names them from
  // model.named_parameters() and moduleClassName(model.name()).
  void saveParameters(const torch::nn::Module& model);
  void saveParameters(const std::string& topClass, const NamedTensors& parameters);
  // Gradients as "gradient/<TopClass>_<path>", as the optimizer will see them: call after
  // the gradient all-reduce and before optimizer.step(). Parameters without a gradient
  // (frozen, or unused this step) are skipped.
  void saveGradients(const torch::nn::Module& model);
  void saveGradients(const std::string& topClass, const NamedTensors& parameters);
  // "<modulePath>_output_<i>" / "<modulePath>_input_<i>"; use the top module's class name
  // as the path for the model's own output/input.
  void saveModuleOutputs(const std::string& modulePath, const std::vector<at::Tensor>& outputs);
  void saveModuleInputs(const std::string& modulePath, const std::vector<at::Tensor>& inputs);
  // "<lossClass>_output_0" (the "losses" collection's default regex selects it).
  void saveLoss(const at::Tensor& loss, const std::string& lossClass = "Loss");
  void saveScalar(const std::string& name, double value) { hook_.saveScalar(name, value); }

  void flush() { hook_.flush(); }
  void close(bool writeEndMarker) { hook_.close(writeEndMarker); }

 private:
  Hook hook_;
};

// The hook strata::debugger::save_scalar()/save_tensor() reach (include/strata/debugger.h).
// The runtime sets it after creating the hook and clears it (nullptr) before destroying it.
// Thread-safe.
void setActiveHook(TorchHook* hook);
TorchHook* activeHook();

}  // namespace strata::debugger
