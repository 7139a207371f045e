#include "adapter/layer_list_model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <set>

#include "pipeline/adapter/agreement.h"

namespace strata::adapter {

TensorKey tensorKey(const torch::Tensor& t) {
  const void* where = t.numel() > 0 ? t.data_ptr() : static_cast<const void*>(t.unsafeGetTensorImpl());
  return {where, t.sizes().vec(), t.scalar_type()};
}

uint64_t worldModelSeed(Group& world) {
  int64_t seed = static_cast<int64_t>(at::detail::getDefaultCPUGenerator().current_seed());
  world.broadcast(&seed, 1, DType::kInt64, 0);
  return static_cast<uint64_t>(seed);
}

WholeModel buildWholeModel(const pipeline::ModelBuilder& builder, Group& world) {
  std::vector<torch::nn::AnyModule> built;
  std::vector<pipeline::Layer> layers;
  std::string error;
  try {
    for (int i = 0; i < builder.numLayers(); ++i) {
      built.push_back(builder.build(i));
      layers.push_back({builder.path(i), built.back()});
    }
  } catch (const c10::Error& e) {
    error = e.what_without_backtrace();
  }
  pipeline::agreeOnError(world, error, "building the model's layers");
  WholeModel out;
  out.root = builder.assemble(built);
  out.tieHandles = pipeline::shareTiedTensors(layers, builder.ties());
  return out;
}

std::vector<torch::Tensor> uniqueTensors(const std::vector<torch::Tensor>& tensors) {
  std::set<TensorKey> seen;
  std::vector<torch::Tensor> out;
  for (const auto& t : tensors)
    if (!t.defined() || seen.insert(tensorKey(t)).second) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> uniqueTensors(
    const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  std::set<TensorKey> seen;
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : named)
    if (!item.second.defined() || seen.insert(tensorKey(item.second)).second) out.push_back(item);
  return out;
}

}  // namespace strata::adapter
