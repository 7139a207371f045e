// libtorch adapter of the debugger (src/debugger/torch_hook.h, include/strata/debugger.h):
// torch::Tensor -> contiguous CPU bytes + dtype for the torch-free writer.
#include <torch/nn/module.h>
#include <torch/types.h>

#include <atomic>
#include <memory>

#include "adapter/observe/layer_instrumentation.h"
#include "core/logging.h"
#include "debugger/naming.h"
#include "debugger/torch_hook.h"
#include "strata/debugger.h"
#include "strata/tensor_ops.h"

namespace strata::debugger {
namespace {

std::atomic<TorchHook*> gActiveHook{nullptr};

NamedTensors namedParameters(const torch::nn::Module& model) {
  NamedTensors out;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  return out;
}

}  // namespace

TorchHook::TorchHook(const config::DebuggerConfig& config, HookOptions options)
    : hook_(config, std::move(options)) {}

bool TorchHook::saveTensor(const std::string& name, const at::Tensor& tensor) {
  if (!tensor.defined() || !hook_.wantsTensor(name)) return false;
  DType dtype;
  if (!dtypeOf(tensor.scalar_type(), &dtype) || tensor.is_sparse() || tensor.is_quantized()) {
    STRATA_LOG(kWarn, kAllSubsys, "debugger: not saving \"", name, "\": unsupported tensor type ",
               tensor.toString());
    return false;
  }
  const at::Tensor detached = tensor.detach();
  std::vector<int64_t> shape(detached.sizes().begin(), detached.sizes().end());
  if (detached.device().is_cpu() && detached.is_contiguous()) {
    // Parameters change in place after this call: copy now (one memcpy).
    return hook_.saveTensor(name, dtype, shape, detached.data_ptr());
  }
  // A device or strided tensor needs a fresh contiguous host copy anyway; hand that copy to
  // the writer instead of copying it again.
  auto host = std::make_shared<at::Tensor>(detached.to(at::kCPU).contiguous());
  if (host->data_ptr() == detached.data_ptr()) *host = host->clone();  // never alias the original
  const void* data = host->data_ptr();
  return hook_.saveTensorShared(name, dtype, shape, std::shared_ptr<const void>(host, data), data);
}

void TorchHook::saveParameters(const torch::nn::Module& model) {
  if (!hook_.anythingDue()) return;
  saveParameters(moduleClassName(model.name()), namedParameters(model));
}

void TorchHook::saveParameters(const std::string& topClass, const NamedTensors& parameters) {
  if (!hook_.anythingDue()) return;
  for (const auto& [path, p] : parameters) saveTensor(parameterTensorName(topClass, path), p);
}

void TorchHook::saveGradients(const torch::nn::Module& model) {
  if (!hook_.anythingDue()) return;
  saveGradients(moduleClassName(model.name()), namedParameters(model));
}

void TorchHook::saveGradients(const std::string& topClass, const NamedTensors& parameters) {
  if (!hook_.anythingDue()) return;
  for (const auto& [path, p] : parameters) {
    if (!p.defined() || !p.requires_grad() || !p.grad().defined()) continue;  // frozen / unused
    saveTensor(gradientTensorName(topClass, path), p.grad());
  }
}

void TorchHook::saveModuleOutputs(const std::string& modulePath, const std::vector<at::Tensor>& outputs) {
  if (!hook_.anythingDue()) return;
  for (size_t i = 0; i < outputs.size(); ++i)
    saveTensor(moduleOutputTensorName(modulePath, static_cast<int>(i)), outputs[i]);
}

void TorchHook::saveModuleInputs(const std::string& modulePath, const std::vector<at::Tensor>& inputs) {
  if (!hook_.anythingDue()) return;
  for (size_t i = 0; i < inputs.size(); ++i)
    saveTensor(moduleInputTensorName(modulePath, static_cast<int>(i)), inputs[i]);
}

void TorchHook::saveLoss(const at::Tensor& loss, const std::string& lossClass) {
  saveTensor(lossTensorName(lossClass), loss);
}

void setActiveHook(TorchHook* hook) { gActiveHook.store(hook); }
TorchHook* activeHook() { return gActiveHook.load(); }

bool enabled() { return activeHook() != nullptr; }

void save_scalar(const std::string& name, double value) {
  if (TorchHook* hook = activeHook()) hook->saveScalar(name, value);
}

bool save_tensor(const std::string& name, const torch::Tensor& tensor) {
  TorchHook* hook = activeHook();
  return hook != nullptr && hook->saveTensor(name, tensor);
}

torch::Tensor module_output(const torch::nn::Module& module, const torch::Tensor& output) {
  instrument::offerModuleOutput(module, output);
  return output;
}

}  // namespace strata::debugger
