#include "pipeline/adapter/layers.h"

#include <torch/torch.h>

#include <algorithm>
#include <map>

#include "core/errors.h"

namespace strata::pipeline {

namespace {

// A nested Sequential's items are layers of their own ("blocks.3"), at any depth.
void appendLayers(const torch::nn::Sequential& container, const std::string& prefix, std::vector<Layer>& out) {
  const auto named = container->named_children();
  size_t i = 0;
  for (const auto& any : *container) {
    STRATA_CHECK(i < named.size(), "pipeline: the Sequential's children and modules disagree");
    const std::string path = prefix + named[i].key();
    if (auto nested = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(any.ptr())) {
      STRATA_CHECK_WITH(ConfigError, nested->size() > 0, "pipeline: the nested Sequential \"", path,
                        "\" is empty; remove it or give it layers");
      appendLayers(torch::nn::Sequential(nested), path + ".", out);
    } else {
      out.push_back({path, any});
    }
    ++i;
  }
}

}  // namespace

std::vector<Layer> layersOf(const torch::nn::Sequential& model) {
  std::vector<Layer> layers;
  appendLayers(model, "", layers);
  return layers;
}

std::string notASequentialMessage(const torch::nn::Module& model) {
  std::vector<std::string> children;
  std::string advice;
  for (const auto& child : model.named_children()) {
    const std::string& name = child.key();
    const std::shared_ptr<torch::nn::Module>& m = child.value();
    if (auto list = std::dynamic_pointer_cast<torch::nn::ModuleListImpl>(m)) {
      const std::string item = list->size() > 0 ? (*list)[0]->name() : std::string("module");
      children.push_back(c10::str(name, " (ModuleList of ", list->size(), " ", item, ")"));
      advice += c10::str(" Put the ModuleList \"", name, "\" in a strata::NestedSequential instead",
                         " (strata/nested_sequential.h: a Sequential that can sit in another; its items are",
                         " called in order and keep their paths \"", name, ".0\", ...): a ModuleList item is a",
                         " Module without its type, and libtorch cannot call it (Module::forward is not virtual).");
    } else if (std::dynamic_pointer_cast<torch::nn::ModuleDictImpl>(m)) {
      children.push_back(c10::str(name, " (ModuleDict)"));
      advice += c10::str(" The ModuleDict \"", name, "\" has no execution order: list the modules it holds in the",
                         " order they run.");
    } else {
      children.push_back(c10::str(name, " (", m->name(), ")"));
    }
  }
  return c10::str("model parallelism cuts a torch::nn::Sequential of layers into stages, but the model is a ",
                  model.name(), " (children: ", children.empty() ? std::string("none") : c10::Join(", ", children),
                  ").", advice, " Pass a torch::nn::Sequential of its children in execution order (they share the",
                  " same submodules and parameters), or describe the model with strata::LayerList, which never",
                  " builds the layers of other stages (docs/pipeline.md).");
}

std::vector<int> TiedTensor::layers() const {
  std::vector<int> out;
  for (const auto& use : uses) out.push_back(use.first);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<TiedTensor> sharedParameters(const std::vector<Layer>& layers) {
  std::map<const void*, TiedTensor> byTensor;
  std::vector<const void*> order;  // first use order, so results are deterministic
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].module.is_empty()) continue;
    for (const auto& p : layers[i].module.ptr()->named_parameters(/*recurse=*/true)) {
      const void* key = p.value().unsafeGetTensorImpl();
      auto [it, inserted] = byTensor.emplace(key, TiedTensor{});
      if (inserted) order.push_back(key);
      it->second.uses.emplace_back(static_cast<int>(i), p.key());
    }
  }
  std::vector<TiedTensor> out;
  for (const void* key : order) {
    TiedTensor& t = byTensor.at(key);
    if (t.layers().size() > 1) out.push_back(std::move(t));
  }
  return out;
}

uint64_t layerSeed(uint64_t base, int64_t step, int microbatch, int layer) {
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  uint64_t h = mix(base);
  h = mix(h ^ static_cast<uint64_t>(step));
  h = mix(h ^ static_cast<uint64_t>(static_cast<uint32_t>(microbatch)));
  h = mix(h ^ static_cast<uint64_t>(static_cast<uint32_t>(layer)));
  return h >> 1;  // torch::manual_seed takes any uint64; keep it positive for logs
}

uint64_t initSeed(uint64_t modelSeed, const std::string& layerPath) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a, 64 bit
  for (unsigned char c : layerPath) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return layerSeed(modelSeed, static_cast<int64_t>(hash), /*microbatch=*/-1, /*layer=*/-1);
}

torch::Tensor runLayers(const std::vector<Layer>& layers, int begin, int end, torch::Tensor x,
                        const SeedContext* seed) {
  for (int i = begin; i < end; ++i) {
    if (seed) torch::manual_seed(layerSeed(seed->base, seed->step, seed->microbatch, i));
    x = layers[static_cast<size_t>(i)].module.forward<torch::Tensor>(x);
  }
  return x;
}

torch::Tensor TensorShape::empty(int64_t batch) const {
  std::vector<int64_t> s = sizes;
  s.at(0) = batch;
  return torch::empty(s, torch::TensorOptions().dtype(dtype));
}

int64_t TensorShape::bytesPerSample() const {
  int64_t n = 1;
  for (size_t i = 1; i < sizes.size(); ++i) n *= sizes[i];
  return n * static_cast<int64_t>(c10::elementSize(dtype));
}

void checkBatchMajor(const std::string& name, size_t index, const torch::Tensor& output, int64_t batch) {
  STRATA_CHECK(output.dim() >= 1 && output.size(0) == batch, "pipeline: layer ", index, " (", name,
               ") returned shape ", output.sizes(), " for a batch of ", batch,
               "; every layer's output must keep the batch as dimension 0");
}

namespace {
template <typename Fn>
std::vector<std::pair<std::string, torch::Tensor>> collect(const std::vector<Layer>& layers, int begin, int end,
                                                           Fn named) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (int i = begin; i < end; ++i) {
    const Layer& layer = layers[static_cast<size_t>(i)];
    for (const auto& item : named(*layer.module.ptr())) out.emplace_back(layer.name + "." + item.key(), item.value());
  }
  return out;
}
}  // namespace

std::vector<std::pair<std::string, torch::Tensor>> namedParameters(const std::vector<Layer>& layers, int begin,
                                                                    int end) {
  return collect(layers, begin, end, [](torch::nn::Module& m) { return m.named_parameters(true); });
}

std::vector<std::pair<std::string, torch::Tensor>> namedBuffers(const std::vector<Layer>& layers, int begin,
                                                                 int end) {
  return collect(layers, begin, end, [](torch::nn::Module& m) { return m.named_buffers(true); });
}

}  // namespace strata::pipeline
