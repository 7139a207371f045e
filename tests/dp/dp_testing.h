// Shared helpers of the data-parallel tests: seeded data, models built identically on
// every rank, and a single-process reference trained on the global batch.
#pragma once

#include <torch/torch.h>

#include "strata/strata.h"

namespace strata::testing {

constexpr int64_t kGlobalBatch = 16;  // divisible by 1, 2 and 4 ranks

inline torch::nn::Sequential makeMlp(torch::Dtype dtype = torch::kFloat32, int64_t hidden = 16) {
  torch::manual_seed(1234);  // every rank, and the reference, start from the same weights
  torch::nn::Sequential net(torch::nn::Linear(8, hidden), torch::nn::Tanh(), torch::nn::Linear(hidden, 4));
  net->to(dtype);
  return net;
}

// Global batch number `step` (identical on every rank).
inline std::pair<torch::Tensor, torch::Tensor> globalBatch(int step, torch::Dtype dtype = torch::kFloat32) {
  torch::manual_seed(1000 + step);
  return {torch::randn({kGlobalBatch, 8}).to(dtype), torch::randn({kGlobalBatch, 4}).to(dtype)};
}

// This rank's slice of a global batch.
inline torch::Tensor localSlice(const torch::Tensor& t) {
  const int64_t per = t.size(0) / strata::size();
  return t.narrow(0, per * strata::rank(), per);
}

// Largest relative difference between two parameter lists.
inline double maxRelativeDiff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto diff = (a[i] - b[i]).abs().max().item<double>();
    const auto scale = std::max(1e-12, b[i].abs().max().item<double>());
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

inline std::vector<torch::Tensor> snapshot(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone());
  return out;
}

// One training step on the global batch (x, y) with an MSE loss: the single-process
// reference on the whole batch, the data-parallel model on this rank's slice.
inline void stepBoth(torch::nn::Sequential& reference, torch::optim::Optimizer& refOpt, DistributedModel& model,
                     DistributedOptimizer& opt, const torch::Tensor& x, const torch::Tensor& y) {
  refOpt.zero_grad();
  torch::mse_loss(reference->forward(x), y).backward();
  refOpt.step();
  opt.zero_grad();
  model.backward(torch::mse_loss(model(localSlice(x)), localSlice(y)));
  opt.step();
}

}  // namespace strata::testing
