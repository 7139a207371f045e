#include "pipeline/adapter/profile.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/types.h>

#include <chrono>
#include <limits>
#include <mutex>

namespace strata::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

// Saves what a profiling run may change and puts it back on destruction.
class TrainingStateGuard {
 public:
  explicit TrainingStateGuard(torch::nn::Module& model) : model_(model) {
    for (auto& b : model.buffers(true)) buffers_.push_back({b, b.detach().clone()});
    for (auto& p : model.parameters(true)) grads_.push_back({p, p.grad().defined() ? p.grad().clone() : torch::Tensor()});
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    rng_ = gen.get_state();
  }
  ~TrainingStateGuard() {
    torch::NoGradGuard noGrad;
    for (auto& [b, saved] : buffers_) b.copy_(saved);
    for (auto& [p, saved] : grads_) {
      if (saved.defined())
        p.mutable_grad().copy_(saved);
      else if (p.grad().defined())
        p.mutable_grad() = torch::Tensor();
    }
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng_);
  }

 private:
  torch::nn::Module& model_;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> buffers_;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> grads_;
  torch::Tensor rng_;
};

size_t bytesOf(const std::vector<torch::Tensor>& ts, bool gradOnly) {
  size_t n = 0;
  for (const auto& t : ts)
    if (!gradOnly || t.requires_grad()) n += t.nbytes();
  return n;
}

}  // namespace

std::vector<LayerCost> profileLayers(const std::vector<Layer>& layers, torch::nn::Module& model,
                                     const torch::Tensor& sampleMicrobatch, int repeats) {
  TrainingStateGuard guard(model);
  std::vector<LayerCost> costs(layers.size());
  torch::Tensor x = sampleMicrobatch;
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerCost& c = costs[i];
    c.name = layers[i].name;
    const auto params = layers[i].module.ptr()->parameters(true);
    c.parameterBytes = bytesOf(params, false);
    c.gradientBytes = bytesOf(params, true);
    c.optimizerStateBytes = 2 * c.gradientBytes;
    double bestForward = std::numeric_limits<double>::infinity();
    double bestBackward = std::numeric_limits<double>::infinity();
    torch::Tensor out;
    for (int r = 0; r < std::max(1, repeats); ++r) {
      torch::Tensor in = x.detach();
      // As in training: the data entering layer 0 needs no gradient (its backward is cheaper).
      if (i > 0 && in.is_floating_point()) in.requires_grad_(true);
      auto start = Clock::now();
      out = layers[i].module.forward<torch::Tensor>(in);
      bestForward = std::min(bestForward, std::chrono::duration<double>(Clock::now() - start).count());
      if (out.requires_grad()) {
        torch::Tensor grad = torch::ones_like(out);
        start = Clock::now();
        torch::autograd::backward({out}, {grad});
        bestBackward = std::min(bestBackward, std::chrono::duration<double>(Clock::now() - start).count());
      } else {
        bestBackward = 0;
      }
    }
    c.forwardSeconds = bestForward;
    c.backwardSeconds = bestBackward;
    c.activationBytes = out.nbytes();
    c.stashBytes = out.nbytes();
    x = out.detach();
  }
  // Tied parameters: the shared layers form one tie group (their bytes count once).
  const auto ties = tiedLayerRanges(layers);
  for (size_t g = 0; g < ties.size(); ++g) {
    costs[static_cast<size_t>(ties[g].first)].tieGroup = static_cast<int>(g);
    costs[static_cast<size_t>(ties[g].second)].tieGroup = static_cast<int>(g);
  }
  return costs;
}

}  // namespace strata::pipeline
