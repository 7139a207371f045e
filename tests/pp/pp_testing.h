// Shared helpers of the pipeline tests: a small MLP with enough layers for 2 stages x 2
// virtual stages, seeded batches, and the single-process reference that accumulates the
// same microbatches with the same per-layer dropout seeds.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "pipeline/adapter/layers.h"
#include "strata/strata.h"

namespace strata::testing {

constexpr int64_t kBatch = 16;  // per pipeline replica and step

// Layers: 0 Linear, 1 Tanh, 2 Linear, 3 Dropout, 4 Tanh, then `extraBlocks` x (Linear, Tanh),
// then the Linear head.
inline torch::nn::Sequential makeNet(double dropout = 0, int extraBlocks = 0) {
  torch::manual_seed(1234);  // every rank, and the reference, start from the same weights
  namespace nn = torch::nn;
  nn::Sequential net(nn::Linear(8, 16), nn::Tanh(), nn::Linear(16, 16), nn::Dropout(dropout), nn::Tanh());
  for (int b = 0; b < extraBlocks; ++b) {
    net->push_back(nn::Linear(16, 16));
    net->push_back(nn::Tanh());
  }
  net->push_back(nn::Linear(16, 4));
  return net;
}

// Global batch number `step` for `replicas` data-parallel replicas (identical on every rank).
inline std::pair<torch::Tensor, torch::Tensor> batchFor(int step, int replicas) {
  torch::manual_seed(5000 + step);
  return {torch::randn({kBatch * replicas, 8}), torch::randn({kBatch * replicas, 4})};
}

inline torch::Tensor replicaSlice(const torch::Tensor& t, int replica) {
  return t.narrow(0, kBatch * replica, kBatch);
}

inline torch::Tensor mseStep(strata::DistributedModel& m, const torch::Tensor& x, const torch::Tensor& y) {
  auto loss = torch::mse_loss(m(x), y);
  m.backward(loss);
  return loss;
}

// One process accumulating the microbatches of one replica's batch, as the pipeline does:
// per microbatch, every layer seeded with layerSeed(base, step, mb, layer), then
// (loss / m).backward(). Returns the losses.
inline std::vector<torch::Tensor> referenceAccumulate(torch::nn::Sequential& net, const torch::Tensor& x,
                                                      const torch::Tensor& y, int microbatches, uint64_t seedBase,
                                                      int64_t step) {
  const auto layers = pipeline::layersOf(net);
  const int64_t size = x.size(0) / microbatches;
  std::vector<torch::Tensor> losses;
  for (int mb = 0; mb < microbatches; ++mb) {
    pipeline::SeedContext seed{seedBase, step, mb};
    auto out = pipeline::runLayers(layers, 0, static_cast<int>(layers.size()), x.narrow(0, mb * size, size),
                                   net->is_training() ? &seed : nullptr);
    auto loss = torch::mse_loss(out, y.narrow(0, mb * size, size));
    (loss / microbatches).backward();
    losses.push_back(loss.detach());
  }
  return losses;
}

inline std::map<std::string, torch::Tensor> gradsOf(torch::nn::Module& net) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : net.named_parameters(true))
    out[p.key()] = p.value().grad().defined() ? p.value().grad().clone() : torch::zeros_like(p.value());
  return out;
}

inline double relativeDiff(const torch::Tensor& a, const torch::Tensor& b) {
  const double diff = (a - b).abs().max().item<double>();
  return diff / std::max(1e-12, b.abs().max().item<double>());
}

// Every rank gets an error of type E whose message has every needle: nobody hangs.
template <typename E, typename Fn>
void expectErrorEverywhere(Fn fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "no error on rank " << strata::rank();
  } catch (const E& e) {
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << "missing \"" << n << "\" in: " << e.what();
  }
}

}  // namespace strata::testing
