#include "pipeline/adapter/layer_list_model.h"

#include <ATen/CPUGeneratorImpl.h>

#include "adapter/ops/agreement.h"

namespace strata::adapter {

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
  agreeOnError(world, error, "building the model's layers");
  WholeModel out;
  out.root = builder.assemble(built);
  out.tieHandles = pipeline::shareTiedTensors(layers, builder.ties());
  return out;
}

}  // namespace strata::adapter
