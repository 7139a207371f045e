#include "pipeline/adapter/layers.h"

#include <torch/torch.h>

#include <map>

#include "core/errors.h"

namespace strata::pipeline {

std::vector<Layer> layersOf(const torch::nn::Sequential& model) {
  std::vector<Layer> layers;
  const auto named = model->named_children();
  size_t i = 0;
  for (const auto& any : *model) {
    STRATA_CHECK(i < named.size(), "pipeline: the Sequential's children and modules disagree");
    layers.push_back({named[i].key(), any});
    ++i;
  }
  return layers;
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

std::vector<TensorShape> probeShapes(const std::vector<Layer>& layers, torch::nn::Module& model,
                                     const torch::Tensor& sample) {
  const bool training = model.is_training();
  model.eval();
  torch::NoGradGuard noGrad;
  std::vector<TensorShape> shapes;
  torch::Tensor x = sample;
  try {
    for (size_t i = 0; i < layers.size(); ++i) {
      x = layers[i].module.forward<torch::Tensor>(x);
      STRATA_CHECK(x.dim() >= 1 && x.size(0) == sample.size(0), "pipeline: layer ", i, " (", layers[i].name,
                   ") returned shape ", x.sizes(), " for a batch of ", sample.size(0),
                   "; every layer's output must keep the batch as dimension 0");
      shapes.push_back({x.sizes().vec(), x.scalar_type()});
    }
  } catch (...) {
    model.train(training);
    throw;
  }
  model.train(training);
  return shapes;
}

std::vector<std::pair<int, int>> tiedLayerRanges(const std::vector<Layer>& layers) {
  std::map<const void*, int> firstUse;
  std::vector<std::pair<int, int>> ranges;
  for (size_t i = 0; i < layers.size(); ++i)
    for (const auto& p : layers[i].module.ptr()->parameters(/*recurse=*/true)) {
      const void* key = p.unsafeGetTensorImpl();
      auto [it, inserted] = firstUse.emplace(key, static_cast<int>(i));
      if (!inserted && it->second != static_cast<int>(i)) ranges.emplace_back(it->second, static_cast<int>(i));
    }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<int, int>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  return merged;
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
