// Sharded optimizer state (dataparallel.shard_optimizer_state): parameters bitwise equal to
// unsharded data-parallel training in float64 (SGD with momentum, AdamW with two param
// groups), uneven shards; each rank's optimizer state covers only its shard; a changed
// parameter set is an error on every rank.
#include <gtest/gtest.h>

#include <string>

#include "collectives/optimizer_partition.h"
#include "dp/dp_shard_models.h"

namespace strata::testing {
namespace {

void expectShardedEqualsUnsharded(const MakeOptimizer& make) {
  Training plain = makeRun(make, false);
  Training sharded = makeRun(make, true);
  ASSERT_TRUE(sharded.opt->sharded());
  ASSERT_FALSE(plain.opt->sharded());
  for (int step = 0; step < 6; ++step) {
    trainStep(plain, step);
    trainStep(sharded, step);
  }
  const auto before = snapshot(makeUnevenNet()->parameters());
  EXPECT_GT(maxRelativeDiff(plain.net->parameters(), before), 1e-3);  // training moved them
  expectBitwiseEqual(sharded.net->parameters(), plain.net->parameters());
  // Every rank holds the same parameters (the broadcasts from the owners).
  for (const auto& p : sharded.net->parameters()) {
    auto all = strata::allgather(p.detach().clone());
    for (int r = 0; r < strata::size(); ++r) EXPECT_TRUE(torch::equal(all[r], p)) << "rank " << r;
  }
}

TEST(ShardedOptimizerState, SgdMomentumBitwiseEqualsUnsharded) { expectShardedEqualsUnsharded(sgdMomentum); }

TEST(ShardedOptimizerState, AdamWTwoGroupsBitwiseEqualsUnsharded) { expectShardedEqualsUnsharded(adamwTwoGroups); }

TEST(ShardedOptimizerState, GroupsKeepTheirOptions) {
  Training sharded = makeRun(adamwTwoGroups, true);
  const auto& groups = sharded.opt->optimizer().param_groups();
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(static_cast<const torch::optim::AdamWOptions&>(groups[0].options()).lr(), 0.01);
  EXPECT_EQ(static_cast<const torch::optim::AdamWOptions&>(groups[0].options()).weight_decay(), 0.1);
  EXPECT_EQ(static_cast<const torch::optim::AdamWOptions&>(groups[1].options()).lr(), 0.02);
  EXPECT_EQ(static_cast<const torch::optim::AdamWOptions&>(groups[1].options()).weight_decay(), 0.0);
}

TEST(ShardedOptimizerState, EachRankHoldsOnlyItsShardsState) {
  Training plain = makeRun(adamwTwoGroups, false);
  Training sharded = makeRun(adamwTwoGroups, true);
  for (int step = 0; step < 2; ++step) {
    trainStep(plain, step);
    trainStep(sharded, step);
  }
  // The partition of the optimizer's parameters (group order), as the sharding computed it.
  std::vector<torch::Tensor> params;
  const auto unshardedOrder = adamwTwoGroups(plain.net);
  for (const auto& g : unshardedOrder->param_groups())
    for (const auto& p : g.params()) params.push_back(p);
  std::vector<size_t> bytes;
  for (const auto& p : params) bytes.push_back(static_cast<size_t>(p.numel()) * p.element_size());
  const auto owner = collectives::partitionParameters(bytes, strata::size());
  const size_t mine = collectives::bytesPerPart(bytes, owner, strata::size())[static_cast<size_t>(strata::rank())];
  // AdamW keeps exp_avg and exp_avg_sq: twice the parameter bytes, of this rank's shard only.
  EXPECT_EQ(sharded.opt->state_bytes(), 2 * mine);
  size_t allBytes = 0;
  for (size_t b : bytes) allBytes += b;
  EXPECT_EQ(plain.opt->state_bytes(), 2 * allBytes);
  size_t owned = 0;
  for (int o : owner) owned += o == strata::rank() ? 1 : 0;
  EXPECT_EQ(sharded.opt->optimizer().state().size(), owned);
  // Over all ranks, the shards add up to the unsharded state.
  int64_t total = static_cast<int64_t>(sharded.opt->state_bytes());
  strata::world().allreduce(&total, &total, 1, DType::kInt64, ReduceOp::kSum);
  EXPECT_EQ(total, static_cast<int64_t>(plain.opt->state_bytes()));
}

TEST(ShardedOptimizerState, AddedParamGroupOnOneRankThrowsOnEveryRank) {
  Training sharded = makeRun(sgdMomentum, true);
  trainStep(sharded, 0);
  expectAddedParamGroupThrows(sharded, 1);
}

TEST(ShardedOptimizerState, TensorOutsideTheModelIsRefused) {
  auto net = makeUnevenNet();
  DistributedModel model(net);
  auto params = net->parameters();
  params.push_back(torch::zeros({5}, torch::kFloat64).requires_grad_());
  try {
    DistributedOptimizer opt(torch::optim::SGD(params, 0.1), model, DistributedOptimizerOptions{1});
    ADD_FAILURE() << "a tensor outside the model was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("not a parameter of the model"), std::string::npos) << e.what();
  }
}

TEST(ShardedOptimizerState, LbfgsIsRefused) {
  auto net = makeUnevenNet();
  DistributedModel model(net);
  try {
    DistributedOptimizer opt(torch::optim::LBFGS(net->parameters()), model, DistributedOptimizerOptions{1});
    ADD_FAILURE() << "LBFGS was sharded";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("LBFGS keeps one state"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata::testing
