// Host-shared parameters (dataparallel.host_shared_parameters): parameters bitwise equal to
// unsharded training in float64 (SGD with momentum, AdamW with two groups, uneven shards that
// cut through parameters); .grad() after backward is the averaged gradient; each rank steps
// only its pieces, which together cover every element once; a checkpoint loaded after the
// switch restores the host's state; clip_grad_norm agrees with clipping unsharded gradients;
// a 16-bit gradient wire falls back to whole-tensor sharding; a changed parameter set throws
// on every rank. With one rank the mode is never used (and the tests check that).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "dp/dp_shard_models.h"
#include "strata/checkpoint.h"

namespace strata::testing {
namespace {

DistributedOptimizerOptions hostShared() { return DistributedOptimizerOptions{1, 1}; }
DistributedOptimizerOptions unsharded() { return DistributedOptimizerOptions{0, 0}; }

bool expectHostShared() { return strata::size() > 1; }

void expectHostSharedEqualsUnsharded(const MakeOptimizer& make) {
  Training plain = makeRun(make, unsharded());
  Training hosted = makeRun(make, hostShared());
  for (int step = 0; step < 6; ++step) {
    trainStep(plain, step);
    trainStep(hosted, step);
    // The switch happens at the second step, once the buckets are final.
    if (step >= 1) EXPECT_EQ(hosted.opt->host_shared(), expectHostShared()) << "step " << step;
  }
  const auto before = snapshot(makeUnevenNet()->parameters());
  EXPECT_GT(maxRelativeDiff(plain.net->parameters(), before), 1e-3);  // training moved them
  expectBitwiseEqual(hosted.net->parameters(), plain.net->parameters());
}

TEST(HostSharedParameters, SgdMomentumBitwiseEqualsUnsharded) { expectHostSharedEqualsUnsharded(sgdMomentum); }

TEST(HostSharedParameters, AdamWTwoGroupsBitwiseEqualsUnsharded) { expectHostSharedEqualsUnsharded(adamwTwoGroups); }

// Every state tensor the five optimizers can keep: amsgrad's maximum, RMSprop's momentum
// buffer and centred average, Adagrad's sum (allocated by its constructor).
TEST(HostSharedParameters, EveryStateTensorOfEveryOptimizerBitwiseEqualsUnsharded) {
  expectHostSharedEqualsUnsharded([](torch::nn::Sequential& net) {
    return std::make_unique<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(0.01).amsgrad(true));
  });
  expectHostSharedEqualsUnsharded([](torch::nn::Sequential& net) {
    return std::make_unique<torch::optim::RMSprop>(net->parameters(),
                                                   torch::optim::RMSpropOptions(0.01).momentum(0.5).centered(true));
  });
  expectHostSharedEqualsUnsharded([](torch::nn::Sequential& net) {
    return std::make_unique<torch::optim::Adagrad>(net->parameters(), torch::optim::AdagradOptions(0.05));
  });
  expectHostSharedEqualsUnsharded([](torch::nn::Sequential& net) {
    return std::make_unique<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.05));
  });
}

TEST(HostSharedParameters, StateTheOptionsDidNotAllowIsAClearError) {
  Training hosted = makeRun(
      [](torch::nn::Sequential& net) {
        return std::make_unique<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.05));
      },
      hostShared());
  for (int step = 0; step < 2; ++step) trainStep(hosted, step);
  if (!expectHostShared()) return;  // one rank: nothing is shared, momentum may be turned on
  for (auto& g : hosted.opt->optimizer().param_groups())
    static_cast<torch::optim::SGDOptions&>(g.options()).momentum(0.9);
  try {
    trainStep(hosted, 2);
    ADD_FAILURE() << "momentum turned on after the switch was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("momentum or amsgrad turned on later"), std::string::npos) << e.what();
  }
}

// Also where the reduction read the own shard: from autograd's tensors (1/n of the bytes),
// in the host-shared reduce-scatter as in the AllReduce before the switch.
TEST(HostSharedParameters, GradientsAfterBackwardAreTheAverages) {
  Training plain = makeRun(sgdMomentum, unsharded());
  Training hosted = makeRun(sgdMomentum, hostShared());
  for (int step = 0; step < 4; ++step) {
    hosted.model->reset_stats();
    backwardStep(plain, step);
    backwardStep(hosted, step);
    const DistributedModel::Stats s = hosted.model->stats();
    const double slack = 64.0 * static_cast<double>(hosted.model->num_buckets());
    EXPECT_NEAR(static_cast<double>(s.bytesReadInPlace),
                strata::size() > 1 ? static_cast<double>(s.bytesReduced) / strata::size() : 0.0, slack)
        << "step " << step;
    std::vector<torch::Tensor> a, b;
    for (const auto& p : plain.net->parameters()) a.push_back(p.grad());
    for (const auto& p : hosted.net->parameters()) b.push_back(p.grad());
    expectBitwiseEqual(b, a);
    plain.opt->step();
    hosted.opt->step();
  }
  ASSERT_EQ(hosted.opt->host_shared(), expectHostShared());
}

TEST(HostSharedParameters, RanksStepDisjointPiecesCoveringEveryElement) {
  Training hosted = makeRun(adamwTwoGroups, hostShared());
  for (int step = 0; step < 3; ++step) trainStep(hosted, step);
  ASSERT_EQ(hosted.opt->host_shared(), expectHostShared());
  int64_t total = 0;
  for (const auto& p : hosted.net->parameters()) total += p.numel();
  int64_t mine = 0;
  for (const auto& g : hosted.opt->optimizer().param_groups())
    for (const auto& p : g.params()) mine += p.numel();
  int64_t sum = mine;
  strata::world().allreduce(&sum, &sum, 1, DType::kInt64, ReduceOp::kSum);
  EXPECT_EQ(sum, total);
  // AdamW's two moments, of this rank's elements only.
  EXPECT_EQ(static_cast<int64_t>(hosted.opt->state_bytes()), 2 * mine * 8);
  if (expectHostShared()) EXPECT_LT(mine, total);
}

TEST(HostSharedParameters, CheckpointLoadedAfterTheSwitchRestoresTheState) {
  const std::string root = "/tmp/strata_host_shared_ckpt_" + std::to_string(strata::size());
  if (strata::rank() == 0) std::filesystem::remove_all(root);
  strata::world().barrier();
  Training hosted = makeRun(adamwTwoGroups, hostShared());
  for (int step = 0; step < 4; ++step) trainStep(hosted, step);
  SaveOptions so;
  so.partial = true;
  so.step = 4;
  strata::save(root, *hosted.model, *hosted.opt, so);
  for (int step = 4; step < 6; ++step) trainStep(hosted, step);
  const auto expected = snapshot(hosted.net->parameters());
  // Back to step 4, then the same two steps again: the same parameters, bitwise.
  const auto loaded = strata::load(root, *hosted.model, *hosted.opt);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 4);
  for (int step = 4; step < 6; ++step) trainStep(hosted, step);
  expectBitwiseEqual(hosted.net->parameters(), expected);
  EXPECT_EQ(hosted.opt->host_shared(), expectHostShared());
  strata::world().barrier();
  if (strata::rank() == 0) std::filesystem::remove_all(root);
}

TEST(HostSharedParameters, ClipGradNormMatchesClippingUnshardedGradients) {
  Training plain = makeRun(sgdMomentum, unsharded());
  Training hosted = makeRun(sgdMomentum, hostShared());
  for (int step = 0; step < 4; ++step) {
    backwardStep(plain, step);
    backwardStep(hosted, step);
    const double maxNorm = 0.05;  // below the gradients' norm: they are scaled
    const double expectedNorm = torch::nn::utils::clip_grad_norm_(plain.net->parameters(), maxNorm);
    const double norm = hosted.opt->clip_grad_norm(maxNorm);
    EXPECT_NEAR(norm, expectedNorm, 1e-12 * expectedNorm) << "step " << step;
    EXPECT_GT(norm, maxNorm);
    std::vector<torch::Tensor> a, b;
    for (const auto& p : plain.net->parameters()) a.push_back(p.grad());
    for (const auto& p : hosted.net->parameters()) b.push_back(p.grad());
    EXPECT_LT(maxRelativeDiff(b, a), 1e-12);
    plain.opt->step();
    hosted.opt->step();
  }
  EXPECT_LT(maxRelativeDiff(hosted.net->parameters(), plain.net->parameters()), 1e-10);
}

TEST(HostSharedParameters, BackwardWithoutZeroGradAccumulatesOntoTheAverages) {
  Training plain = makeRun(sgdMomentum, unsharded());
  Training hosted = makeRun(sgdMomentum, hostShared());
  for (int step = 0; step < 3; ++step) {
    trainStep(plain, step);
    trainStep(hosted, step);
  }
  // A second backward on top of the last step's gradients, without zero_grad().
  for (Training* r : {&plain, &hosted}) {
    auto [x, y] = globalBatch(7, torch::kFloat64);
    r->model->backward(torch::mse_loss((*r->model)(localSlice(x)), localSlice(y)));
    r->opt->step();
  }
  expectBitwiseEqual(hosted.net->parameters(), plain.net->parameters());
}

TEST(HostSharedParameters, SixteenBitWireFallsBackToWholeTensorSharding) {
  DistributedModelOptions bf16;
  bf16.gradientDtype = "bfloat16";
  Training hosted = makeRun(sgdMomentum, hostShared(), bf16);
  Training sharded = makeRun(sgdMomentum, DistributedOptimizerOptions{1, 0}, bf16);
  for (int step = 0; step < 3; ++step) {
    trainStep(hosted, step);
    trainStep(sharded, step);
  }
  EXPECT_FALSE(hosted.opt->host_shared());
  expectBitwiseEqual(hosted.net->parameters(), sharded.net->parameters());
}

TEST(HostSharedParameters, AddedParamGroupAfterTheSwitchThrowsOnEveryRank) {
  Training hosted = makeRun(sgdMomentum, hostShared());
  for (int step = 0; step < 2; ++step) trainStep(hosted, step);
  ASSERT_EQ(hosted.opt->host_shared(), expectHostShared());
  expectAddedParamGroupThrows(hosted, 2);
}

// After the host-shared optimizer is gone, another optimizer steps private parameters again
// (stepping the host's one copy on every rank would apply each update once per rank).
TEST(HostSharedParameters, AnotherOptimizerAfterwardsStepsPrivateParameters) {
  const MakeOptimizer sgd = [](torch::nn::Sequential& net) {
    return std::make_unique<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.05));
  };
  Training plain = makeRun(sgd, unsharded());
  Training hosted = makeRun(sgd, hostShared());
  for (int step = 0; step < 3; ++step) {
    trainStep(plain, step);
    trainStep(hosted, step);
  }
  ASSERT_EQ(hosted.opt->host_shared(), expectHostShared());
  for (Training* r : {&plain, &hosted}) {
    r->opt.reset();
    r->opt = std::make_unique<DistributedOptimizer>(sgd(r->net), *r->model, unsharded());
  }
  for (int step = 3; step < 5; ++step) {
    trainStep(plain, step);
    trainStep(hosted, step);
  }
  expectBitwiseEqual(hosted.net->parameters(), plain.net->parameters());
}

TEST(HostSharedParameters, NeedsShardedState) {
  auto net = makeUnevenNet();
  DistributedModel model(net);
  EXPECT_THROW(DistributedOptimizer(torch::optim::SGD(net->parameters(), 0.1), model, DistributedOptimizerOptions{0, 1}),
               ConfigError);
}

}  // namespace
}  // namespace strata::testing
