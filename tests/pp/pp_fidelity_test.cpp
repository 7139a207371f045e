// Pipelined training against one process accumulating the same microbatches: p = 2 stages,
// m = 4 microbatches, both schedules (and virtual stages, activation checkpointing, dropout);
// under mpirun -np 2 (one pipeline) and -np 4 (hybrid: 2 pipelines x 2 data-parallel
// replicas). Gradients must be bitwise equal at every step, step outputs bitwise equal on
// every rank, parameters within 1e-6 relative after 10 steps.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include "pp/pp_testing.h"

namespace strata::testing {
namespace {

struct Case {
  std::string pipeline = "interleaved";
  int virtualStages = 1;
  bool checkpointing = false;
  double dropout = 0;
  int steps = 10;
  std::string placement = "cluster";
};

std::string configFor(const Case& c, int replicas) {
  return c10::str(R"({"enabled": true, "partitions": 2, "microbatches": 4, "pipeline": ")", c.pipeline,
                  R"(", "ddp": )", replicas > 1 ? "true" : "false", R"(, "virtual_stages": )", c.virtualStages,
                  R"(, "activation_checkpointing": )", c.checkpointing ? "true" : "false",
                  R"(, "placement_strategy": ")", c.placement, "\"}");
}

torch::optim::SGD makeSgd(std::vector<torch::Tensor> params) {
  return torch::optim::SGD(std::move(params), torch::optim::SGDOptions(0.05).momentum(0.9));
}

void trainAndCompare(const Case& c) {
  const int replicas = strata::size() / 2;
  auto reference = makeNet(c.dropout);
  auto refOpt = makeSgd(reference->parameters());
  auto net = makeNet(c.dropout);
  const uint64_t seedBase = at::detail::getDefaultCPUGenerator().current_seed();
  DistributedModelOptions options;
  options.modelParallel = configFor(c, replicas);
  DistributedModel model(net, options);
  DistributedOptimizer opt(makeSgd(model.parameters()), model);
  ASSERT_EQ(model.pp_size(), 2);
  ASSERT_EQ(model.dp_size(), replicas);
  const int me = model.dp_rank();
  for (int step = 0; step < c.steps; ++step) {
    auto [x, y] = batchFor(step, replicas);
    // The reference: every replica accumulates its microbatches; the replicas' sums are
    // averaged (for 2 replicas (a + b) / 2 is exact whatever the order).
    std::vector<std::map<std::string, torch::Tensor>> grads;
    std::vector<torch::Tensor> myLosses;
    for (int r = 0; r < replicas; ++r) {
      refOpt.zero_grad();
      auto losses = referenceAccumulate(reference, replicaSlice(x, r), replicaSlice(y, r), 4, seedBase, step);
      if (r == me) myLosses = losses;
      grads.push_back(gradsOf(*reference));
    }
    {
      torch::NoGradGuard noGrad;
      for (auto& p : reference->named_parameters(true)) {
        torch::Tensor g = grads[0][p.key()];
        for (int r = 1; r < replicas; ++r) g = g + grads[static_cast<size_t>(r)][p.key()];
        if (replicas > 1) g = g / replicas;
        p.value().mutable_grad() = g;
      }
    }
    opt.zero_grad();
    StepOutput out = model.step(replicaSlice(x, me), replicaSlice(y, me), mseStep);
    ASSERT_EQ(out.outputs.size(), 4u);
    EXPECT_DOUBLE_EQ(out.reduce_sum().item<double>(), torch::stack(myLosses).to(torch::kFloat64).sum().item<double>());
    for (size_t mb = 0; mb < 4; ++mb)
      EXPECT_TRUE(torch::equal(out.outputs[mb], myLosses[mb]))
          << "step " << step << " microbatch " << mb << ": " << out.outputs[mb].item<float>() << " vs "
          << myLosses[mb].item<float>();
    const auto local = model.local_state_dict();
    int compared = 0;
    for (const auto& p : reference->named_parameters(true)) {
      const torch::Tensor* mine = local.find(p.key());
      if (!mine) continue;
      ++compared;
      ASSERT_TRUE(mine->grad().defined()) << p.key() << " has no gradient at step " << step;
      EXPECT_TRUE(torch::equal(mine->grad(), p.value().grad()))
          << "step " << step << " " << p.key() << " gradient differs by "
          << (mine->grad() - p.value().grad()).abs().max().item<double>();
    }
    EXPECT_GT(compared, 0) << "this rank holds no parameters";
    refOpt.step();
    opt.step();
  }
  const auto local = model.local_state_dict();
  for (const auto& p : reference->named_parameters(true)) {
    const torch::Tensor* mine = local.find(p.key());
    if (mine) {
      EXPECT_LE(relativeDiff(*mine, p.value()), 1e-6) << p.key() << " after " << c.steps << " steps";
    }
  }
}

TEST(PipelineFidelity, SimpleScheduleMatchesOneProcess) { trainAndCompare({"simple"}); }

TEST(PipelineFidelity, InterleavedScheduleMatchesOneProcess) { trainAndCompare({"interleaved"}); }

TEST(PipelineFidelity, VirtualStagesMatchOneProcess) {
  Case c{"interleaved", 2};
  c.steps = 4;
  trainAndCompare(c);
}

TEST(PipelineFidelity, DropoutDoesNotDependOnThePartition) {
  // The reference runs every layer in one process with the documented per-(step,
  // microbatch, layer) seeds: equal gradients mean the masks do not depend on p.
  Case c{"interleaved"};
  c.dropout = 0.3;
  c.steps = 4;
  trainAndCompare(c);
}

TEST(PipelineFidelity, ActivationCheckpointingRecomputesTheSameMasks) {
  Case c{"simple"};
  c.dropout = 0.3;
  c.checkpointing = true;
  c.steps = 3;
  trainAndCompare(c);
}

TEST(PipelineFidelity, SpreadPlacementMatchesOneProcess) {
  // spread: the ranks of a data-parallel group are adjacent (pipelines [0,2] [1,3] on 4 ranks).
  Case c{"interleaved"};
  c.placement = "spread";
  c.steps = 3;
  trainAndCompare(c);
}

TEST(PipelineFidelity, EvaluationForwardGivesTheLastStageOutputEverywhere) {
  const int replicas = strata::size() / 2;
  auto reference = makeNet();
  auto net = makeNet();
  DistributedModelOptions options;
  options.modelParallel = configFor({"interleaved"}, replicas);
  DistributedModel model(net, options);
  model.eval();  // evaluation before any training step: the first forward partitions
  reference->eval();
  torch::NoGradGuard noGrad;
  const torch::Tensor probe = torch::randn({5, 8});
  torch::Tensor mine = probe.clone();
  broadcast(mine, 0);  // same input on every rank
  EXPECT_TRUE(torch::equal(model(mine), reference->forward(mine)));
}

}  // namespace
}  // namespace strata::testing
