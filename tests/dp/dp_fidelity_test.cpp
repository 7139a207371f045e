// Numerical fidelity: N ranks with batch B/N reach the parameters one process reaches
// with batch B (1e-5 relative in float32; bitwise in float64 with exact arithmetic).
#include <gtest/gtest.h>

#include "dp/dp_testing.h"

namespace strata::testing {
namespace {

template <typename MakeOpt>
void trainBoth(int steps, torch::Dtype dtype, MakeOpt makeOpt, double tolerance, DistributedModelOptions options = {}) {
  auto reference = makeMlp(dtype);
  auto refOpt = makeOpt(reference->parameters());
  auto net = makeMlp(dtype);
  DistributedModel model(net, options);
  DistributedOptimizer opt(makeOpt(model.parameters()), model);
  for (int step = 0; step < steps; ++step) {
    auto [x, y] = globalBatch(step, dtype);
    refOpt.zero_grad();
    torch::mse_loss(reference->forward(x), y).backward();
    refOpt.step();

    opt.zero_grad();
    model.step(localSlice(x), localSlice(y), [](DistributedModel& m, const torch::Tensor& lx, const torch::Tensor& ly) {
      auto loss = torch::mse_loss(m(lx), ly);
      m.backward(loss);
      return loss;
    });
    opt.step();
  }
  const double diff = maxRelativeDiff(model.parameters(), reference->parameters());
  EXPECT_LE(diff, tolerance) << "after " << steps << " steps on " << strata::size() << " ranks";
}

TEST(DataParallelFidelity, SgdFloat32MatchesOneProcess) {
  trainBoth(20, torch::kFloat32,
            [](std::vector<torch::Tensor> p) { return torch::optim::SGD(p, torch::optim::SGDOptions(0.1).momentum(0.9)); },
            1e-5);
}

TEST(DataParallelFidelity, AdamWFloat32MatchesOneProcess) {
  trainBoth(20, torch::kFloat32,
            [](std::vector<torch::Tensor> p) { return torch::optim::AdamW(p, torch::optim::AdamWOptions(1e-2)); }, 1e-5);
}

TEST(DataParallelFidelity, SeveralSmallBucketsGiveTheSameResult) {
  DistributedModelOptions options;
  options.bucketCapMb = 100.0 / (1 << 20);  // ~100 bytes: one bucket per parameter or so
  options.firstBucketMb = 50.0 / (1 << 20);
  trainBoth(10, torch::kFloat32, [](std::vector<torch::Tensor> p) { return torch::optim::SGD(p, 0.1); }, 1e-5,
            options);
}

TEST(DataParallelFidelity, Float64MatchesOneProcess) {
  trainBoth(20, torch::kFloat64, [](std::vector<torch::Tensor> p) { return torch::optim::SGD(p, 0.1); }, 1e-12);
}

TEST(DataParallelFidelity, Float64WithExactArithmeticIsBitwiseEqual) {
  // Integer inputs, integer weights, power-of-two batch and learning rate: every
  // intermediate value is exact, so the summation order cannot matter. Each step adds
  // about 11 fractional bits to the weights (mean over 64 values, lr 2^-6), so after
  // 3 steps everything still fits float64's 53-bit mantissa.
  auto build = [] {
    torch::nn::Sequential net(torch::nn::Linear(torch::nn::LinearOptions(8, 4)));
    net->to(torch::kFloat64);
    torch::NoGradGuard g;
    for (auto& p : net->parameters()) p.copy_(torch::arange(p.numel(), torch::kFloat64).reshape(p.sizes()).remainder(5) - 2);
    return net;
  };
  auto reference = build();
  torch::optim::SGD refOpt(reference->parameters(), 1.0 / 64);
  auto net = build();
  DistributedModel model(net);
  DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 1.0 / 64), model);
  for (int step = 0; step < 3; ++step) {
    torch::manual_seed(step);
    auto x = torch::randint(-3, 4, {kGlobalBatch, 8}, torch::kFloat64);
    auto y = torch::randint(-3, 4, {kGlobalBatch, 4}, torch::kFloat64);
    stepBoth(reference, refOpt, model, opt, x, y);
  }
  const auto a = model.parameters(), b = reference->parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
}

}  // namespace
}  // namespace strata::testing
