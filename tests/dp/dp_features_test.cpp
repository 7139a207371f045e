// Frozen and unused parameters, no_sync accumulation, BatchNorm buffers, bucket
// rebuilding, 16-bit gradient AllReduce, gradients as (shared) bucket views, the AllReduce
// statistics, and models that differ across ranks.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "dp/dp_testing.h"

namespace strata::testing {
namespace {

TEST(DataParallelFeatures, FrozenParametersAreSkipped) {
  auto reference = makeMlp();
  auto net = makeMlp();
  for (auto* n : {&reference, &net})
    for (auto& p : (*n)[0]->parameters()) p.set_requires_grad(false);
  torch::optim::SGD refOpt(reference->parameters(), 0.1);
  DistributedModel model(net);
  DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 0.1), model);
  const auto frozenBefore = snapshot(net[0]->parameters());
  for (int step = 0; step < 5; ++step) {
    auto [x, y] = globalBatch(step);
    stepBoth(reference, refOpt, model, opt, x, y);
  }
  EXPECT_LE(maxRelativeDiff(model.parameters(), reference->parameters()), 1e-5);
  EXPECT_EQ(maxRelativeDiff(net[0]->parameters(), frozenBefore), 0.0);
}

TEST(DataParallelFeatures, UnusedParametersDoNotBlock) {
  // A module with a layer the forward never uses.
  torch::manual_seed(7);
  auto used = torch::nn::Linear(8, 4);
  auto unused = torch::nn::Linear(8, 4);
  auto holder = std::make_shared<torch::nn::Module>();
  holder->register_module("used", used);
  holder->register_module("unused", unused);
  DistributedModel model(holder, [used](const torch::Tensor& x) mutable { return used->forward(x); });
  DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 0.1), model);
  const auto unusedBefore = snapshot(unused->parameters());
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = globalBatch(step);
    opt.zero_grad();
    model.backward(torch::mse_loss(model(localSlice(x)), localSlice(y)));
    opt.step();
  }
  EXPECT_EQ(maxRelativeDiff(unused->parameters(), unusedBefore), 0.0);
  // The used layer is identical on every rank.
  auto w = used->weight.detach().clone();
  auto all = strata::allgather(w);
  for (int r = 0; r < strata::size(); ++r) EXPECT_TRUE(torch::equal(all[r], w)) << "rank " << r;
}

TEST(DataParallelFeatures, NoSyncAccumulationEqualsTheLargerBatch) {
  auto reference = makeMlp();
  auto net = makeMlp();
  torch::optim::SGD refOpt(reference->parameters(), 0.05);
  DistributedModel model(net);
  DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 0.05), model);
  for (int step = 0; step < 3; ++step) {
    refOpt.zero_grad();
    opt.zero_grad();
    for (int micro = 0; micro < 3; ++micro) {
      auto [x, y] = globalBatch(step * 10 + micro);
      torch::mse_loss(reference->forward(x), y).backward();
      auto loss = torch::mse_loss(model(localSlice(x)), localSlice(y));
      if (micro < 2) {
        auto guard = model.no_sync();
        model.backward(loss);
      } else {
        model.backward(loss);
      }
    }
    refOpt.step();
    opt.step();
  }
  EXPECT_LE(maxRelativeDiff(model.parameters(), reference->parameters()), 1e-5);
}

TEST(DataParallelFeatures, BatchNormBuffersFollowRankZero) {
  torch::manual_seed(3);
  torch::nn::Sequential net(torch::nn::Linear(8, 6), torch::nn::BatchNorm1d(6), torch::nn::Linear(6, 4));
  DistributedModel model(net);
  DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 0.1), model);
  for (int step = 0; step < 4; ++step) {
    auto [x, y] = globalBatch(step);
    opt.zero_grad();
    model.backward(torch::mse_loss(model(localSlice(x) + strata::rank()), localSlice(y)));
    opt.step();
  }
  // A training forward starts from rank 0's statistics (broadcast) and updates them with
  // its input: with the same input on every rank, every rank ends with the same values.
  { torch::NoGradGuard g; model(globalBatch(9).first); }
  for (const auto& b : net->buffers()) {
    if (!b.is_floating_point()) continue;
    auto all = strata::allgather(b);
    for (int r = 0; r < strata::size(); ++r) EXPECT_TRUE(torch::equal(all[r], all[0])) << "rank " << r;
  }
}

TEST(DataParallelFeatures, BucketsAreRebuiltOnceFromTheObservedOrder) {
  auto net = makeMlp(torch::kFloat32, 64);
  DistributedModelOptions options;
  options.bucketCapMb = 2048.0 / (1 << 20);
  options.firstBucketMb = 512.0 / (1 << 20);
  DistributedModel model(net, options);
  DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 0.1), model);
  EXPECT_FALSE(model.buckets_rebuilt());
  EXPECT_GT(model.num_buckets(), 1u);
  for (int step = 0; step < 2; ++step) {
    auto [x, y] = globalBatch(step);
    opt.zero_grad();
    model.backward(torch::mse_loss(model(localSlice(x)), localSlice(y)));
    opt.step();
  }
  EXPECT_TRUE(model.buckets_rebuilt());
}

TEST(DataParallelFeatures, Bfloat16GradientsTrainCloseToTheReference) {
  auto reference = makeMlp();
  auto net = makeMlp();
  torch::optim::SGD refOpt(reference->parameters(), 0.1);
  DistributedModelOptions options;
  options.gradientDtype = "bfloat16";
  DistributedModel model(net, options);
  DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 0.1), model);
  for (int step = 0; step < 10; ++step) {
    auto [x, y] = globalBatch(step);
    stepBoth(reference, refOpt, model, opt, x, y);
  }
  const double diff = maxRelativeDiff(model.parameters(), reference->parameters());
  EXPECT_LE(diff, 2e-2);
  if (strata::size() > 1) EXPECT_GT(diff, 0.0) << "bfloat16 rounding should leave a trace";
}

// DDP's gradient_as_bucket_view: after backward, the user's .grad() is the averaged
// gradient of the global batch, read straight from the bucket; with peers on this host the
// buckets live in shared memory and are reduced there (the zero-copy path).
TEST(DataParallelFeatures, GradientsAreAveragedBucketViews) {
  auto reference = makeMlp(torch::kFloat64);
  auto net = makeMlp(torch::kFloat64);
  DistributedModel model(net);
  const char* transport = std::getenv("STRATA_TRANSPORT");
  const bool sharedMemory = strata::size() > 1 && strata::local_size() == strata::size() &&
                            !(transport != nullptr && std::string(transport) == "tcp");
  // No zero_grad() here, so the buckets are rebuilt at the end of step 1's backward with its
  // gradients copied over (checked below); step 2 runs on the rebuilt buckets.
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = globalBatch(step, torch::kFloat64);
    reference->zero_grad();
    torch::mse_loss(reference->forward(x), y).backward();
    for (auto& p : net->parameters()) p.mutable_grad().zero_();
    model.backward(torch::mse_loss(model(localSlice(x)), localSlice(y)));
    std::vector<torch::Tensor> grads, want;
    for (auto& p : net->parameters()) grads.push_back(p.grad());
    for (auto& p : reference->parameters()) want.push_back(p.grad());
    EXPECT_LE(maxRelativeDiff(grads, want), 1e-12) << "step " << step;
    if (sharedMemory) EXPECT_EQ(world().lastAllreduceAlgorithm(), "shm_direct") << "step " << step;
  }
}

// zero_grad() clears the gradients (PyTorch's set_to_none) instead of zeroing the buckets:
// each parameter's next gradient is copied into its bucket and averaged there. A parameter
// only rank 0 uses gets its average on every rank (zeros from the others), and a gradient the
// user set before backward is accumulated onto, as with any defined gradient.
TEST(DataParallelFeatures, ZeroGradClearsAndTheNextGradientsAreAveragedInTheBuckets) {
  auto build = [] {
    torch::manual_seed(11);
    auto holder = std::make_shared<torch::nn::Module>();
    holder->register_module("trunk", torch::nn::Linear(8, 4));
    holder->register_module("extra", torch::nn::Linear(4, 4));
    holder->to(torch::kFloat64);
    return holder;
  };
  auto reference = build();
  auto net = build();
  auto trunk = [](const std::shared_ptr<torch::nn::Module>& m) { return m->named_children()["trunk"]->as<torch::nn::Linear>(); };
  auto extra = [](const std::shared_ptr<torch::nn::Module>& m) { return m->named_children()["extra"]->as<torch::nn::Linear>(); };
  // Rank r's forward; rank 0 alone goes through `extra`.
  auto forward = [&](const std::shared_ptr<torch::nn::Module>& m, const torch::Tensor& x, int rank) {
    torch::Tensor h = trunk(m)->forward(x);
    return rank == 0 ? h + extra(m)->forward(h) : h;
  };
  DistributedModel model(net, [&, net](const torch::Tensor& x) { return forward(net, x, strata::rank()); });
  DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 0.1), model);
  torch::optim::SGD refOpt(reference->parameters(), 0.1);
  const int n = strata::size();
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = globalBatch(step, torch::kFloat64);
    const double userGrad = step == 2 ? 0.5 : 0.0;  // the last step starts from a gradient the user set
    // The reference: the mean over ranks of each rank's loss on its slice.
    refOpt.zero_grad();
    torch::Tensor refLoss = torch::zeros({}, torch::kFloat64);
    const int64_t per = x.size(0) / n;
    for (int r = 0; r < n; ++r)
      refLoss = refLoss + torch::mse_loss(forward(reference, x.narrow(0, per * r, per), r), y.narrow(0, per * r, per));
    (refLoss / n).backward();
    opt.zero_grad();
    for (const auto& p : net->parameters()) EXPECT_FALSE(p.grad().defined()) << "step " << step;
    if (userGrad != 0) {
      trunk(net)->weight.mutable_grad() = torch::full_like(trunk(net)->weight, userGrad);
      torch::NoGradGuard noGrad;
      trunk(reference)->weight.mutable_grad().add_(userGrad);  // every rank's 0.5 averages to 0.5
    }
    model.backward(torch::mse_loss(model(localSlice(x)), localSlice(y)));
    std::vector<torch::Tensor> grads, want;
    for (const auto& p : net->parameters()) grads.push_back(p.grad());
    for (const auto& p : reference->parameters()) want.push_back(p.grad());
    ASSERT_EQ(grads.size(), want.size());
    for (size_t i = 0; i < grads.size(); ++i) ASSERT_TRUE(grads[i].defined()) << "parameter " << i << " step " << step;
    EXPECT_LE(maxRelativeDiff(grads, want), 1e-12) << "step " << step;
    opt.step();
    refOpt.step();
  }
  EXPECT_LE(maxRelativeDiff(net->parameters(), reference->parameters()), 1e-12);
}

// stats(): the AllReduces' run time and the communication thread's CPU time in them. The CPU
// time is what a busy rank's compute loses to the reduction (bench/scaling_bench's
// comm_cpu_ms); on one thread it cannot exceed the run time.
TEST(DataParallelFeatures, StatsCountTheAllReducesTimeAndCpu) {
  auto net = makeMlp(torch::kFloat32, 256);
  DistributedModel model(net);
  DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 0.1), model);
  model.reset_stats();
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = globalBatch(step);
    opt.zero_grad();
    model.backward(torch::mse_loss(model(localSlice(x)), localSlice(y)));
    opt.step();
  }
  const DistributedModel::Stats s = model.stats();
  EXPECT_LE(s.allreduceCpuSeconds, s.allreduceSeconds + 1e-3);
  if (strata::size() == 1) {
    EXPECT_EQ(s.bytesReadInPlace, 0);  // one rank reads its buckets as before: nothing to reduce
    return;
  }  // the runs at 2 and 4 ranks check that something was counted
  EXPECT_EQ(s.steps, 3);
  EXPECT_GT(s.bytesReduced, 0);
  EXPECT_GT(s.allreduceSeconds, 0.0);
  EXPECT_GT(s.allreduceCpuSeconds, 0.0);
  // Every parameter has a gradient, so each bucket's own shard (1/n, cache-line aligned) was
  // read from autograd's tensors: 1/n of the bytes, give or take a line per bucket and step.
  const int64_t slack = 64 * static_cast<int64_t>(model.num_buckets()) * s.steps;
  EXPECT_NEAR(static_cast<double>(s.bytesReadInPlace), static_cast<double>(s.bytesReduced) / strata::size(),
              static_cast<double>(slack));
  model.reset_stats();
  EXPECT_EQ(model.stats().allreduceCpuSeconds, 0.0);
}

// The last bucket is launched by finish() and, with nothing else in flight, runs on the
// training thread (Group::Launch::kHereIfIdle): its whole run is time the caller waited, so
// with one bucket the exposed wait covers every AllReduce's run time (the two intervals nest).
TEST(DataParallelFeatures, ALastBucketRunByTheCallerIsExposedTime) {
  auto net = makeMlp(torch::kFloat32, 64);
  DistributedModel model(net);
  ASSERT_EQ(model.num_buckets(), 1u) << "this test needs a model that fits one bucket";
  DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 0.1), model);
  model.reset_stats();
  for (int step = 0; step < 4; ++step) {
    auto [x, y] = globalBatch(step);
    opt.zero_grad();
    model.backward(torch::mse_loss(model(localSlice(x)), localSlice(y)));
    opt.step();
  }
  const DistributedModel::Stats s = model.stats();
  EXPECT_EQ(s.steps, 4);
  EXPECT_GE(s.exposedSeconds, s.allreduceSeconds);
  EXPECT_GT(s.exposedSeconds, 0.0);
}

TEST(DataParallelFeatures, DifferentModelsAreReportedByName) {
  torch::manual_seed(1);
  const int64_t hidden = strata::rank() == strata::size() - 1 && strata::size() > 1 ? 17 : 16;
  torch::nn::Sequential net(torch::nn::Linear(8, hidden), torch::nn::Tanh(), torch::nn::Linear(hidden, 4));
  if (strata::size() == 1) {
    EXPECT_NO_THROW(DistributedModel model(net));
    return;
  }
  try {
    DistributedModel model(net);
    ADD_FAILURE() << "no error";
  } catch (const strata::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("ranks built different models"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(strata::size() - 1)), std::string::npos) << what;
    if (strata::rank() == strata::size() - 1) EXPECT_NE(what.find("0.weight"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace strata::testing
