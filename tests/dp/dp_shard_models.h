// Models and optimizers of the sharded-optimizer tests (dp_shard_test, dp_host_shared_test):
// parameter counts no rank count divides, and optimizers with state and with two groups.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "dp/dp_testing.h"

namespace strata::testing {

// Six parameter tensors of sizes 104, 13, 91, 7, 28, 4 (elements): no rank count divides them
// evenly, and at 4 ranks the shards differ in size.
inline torch::nn::Sequential makeUnevenNet() {
  torch::manual_seed(4321);
  torch::nn::Sequential net(torch::nn::Linear(8, 13), torch::nn::Tanh(), torch::nn::Linear(13, 7), torch::nn::Tanh(),
                            torch::nn::Linear(7, 4));
  net->to(torch::kFloat64);
  return net;
}

using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(torch::nn::Sequential&)>;

inline std::unique_ptr<torch::optim::Optimizer> sgdMomentum(torch::nn::Sequential& net) {
  return std::make_unique<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
}

// Two groups with different options, which sharding must keep per group.
inline std::unique_ptr<torch::optim::Optimizer> adamwTwoGroups(torch::nn::Sequential& net) {
  std::vector<torch::Tensor> first = net[0]->parameters();
  std::vector<torch::Tensor> rest = net[2]->parameters();
  for (const auto& p : net[4]->parameters()) rest.push_back(p);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(first, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(0.01).weight_decay(0.1)));
  groups.emplace_back(rest, std::make_unique<torch::optim::AdamWOptions>(
                                torch::optim::AdamWOptions(0.02).weight_decay(0.0)));
  return std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(0.03));
}

struct Training {
  torch::nn::Sequential net;
  std::unique_ptr<DistributedModel> model;
  std::unique_ptr<DistributedOptimizer> opt;
};

inline Training makeRun(const MakeOptimizer& make, DistributedOptimizerOptions options,
                        DistributedModelOptions modelOptions = {}) {
  Training r{makeUnevenNet(), nullptr, nullptr};
  r.model = std::make_unique<DistributedModel>(r.net, modelOptions);
  r.opt = std::make_unique<DistributedOptimizer>(make(r.net), *r.model, options);
  return r;
}

inline Training makeRun(const MakeOptimizer& make, bool shard) {
  return makeRun(make, DistributedOptimizerOptions{shard ? 1 : 0, 0});
}

inline void backwardStep(Training& r, int step) {
  auto [x, y] = globalBatch(step, torch::kFloat64);
  r.opt->zero_grad();
  r.model->backward(torch::mse_loss((*r.model)(localSlice(x)), localSlice(y)));
}

inline void trainStep(Training& r, int step) {
  backwardStep(r, step);
  r.opt->step();
}

// The last rank adds a param group, then step `step` must throw on every rank, naming the
// setting, that rank and the change.
inline void expectAddedParamGroupThrows(Training& r, int step) {
  if (strata::rank() == strata::size() - 1) {
    auto extra = torch::zeros({3}, torch::kFloat64).requires_grad_();
    r.opt->optimizer().add_param_group(torch::optim::OptimizerParamGroup({extra}));
  }
  try {
    trainStep(r, step);
    ADD_FAILURE() << "step() after a param group was added did not throw";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("shard_optimizer_state"), std::string::npos) << what;
    EXPECT_NE(what.find("rank " + std::to_string(strata::size() - 1)), std::string::npos) << what;
    EXPECT_NE(what.find("param group"), std::string::npos) << what;
  }
}

inline void expectBitwiseEqual(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "tensor " << i;
}

}  // namespace strata::testing
