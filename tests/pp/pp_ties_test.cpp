// Tied embedding and LM head on different pipeline stages against one process holding one
// tensor for both (plain libtorch): gradients bitwise equal at every step for every
// parameter a rank holds (the head's copy included), both copies bitwise equal after the
// optimizer steps. Both schedules, virtual stages, data-parallel replicas.
#include <gtest/gtest.h>

#include "pp/pp_layer_list_testing.h"

namespace strata::testing {
// Named, not anonymous: the test binary compiles in unity batches beside sources with
// helpers of the same names.
namespace ties_test {

constexpr int64_t kBatch = 8;  // per pipeline replica and step
constexpr int kMicrobatches = 4;
constexpr int kBlocks = 6;

struct Case {
  int partitions = 2;
  int virtualStages = 1;
  std::string pipeline = "interleaved";
  int steps = 3;
};

torch::optim::SGD sgd(std::vector<torch::Tensor> params) {
  return torch::optim::SGD(std::move(params), torch::optim::SGDOptions(0.1).momentum(0.9));
}

// The reference replicas' average gradient of one step, as the pipeline's replicas compute it.
void referenceStep(torch::nn::Sequential& net, torch::optim::SGD& opt, int step, int replicas) {
  const auto [x, y] = tokenBatch(step, kBatch * replicas);
  std::vector<std::map<std::string, torch::Tensor>> grads;
  for (int r = 0; r < replicas; ++r) {
    opt.zero_grad();
    const auto xs = x.narrow(0, kBatch * r, kBatch), ys = y.narrow(0, kBatch * r, kBatch);
    const int64_t size = kBatch / kMicrobatches;
    for (int mb = 0; mb < kMicrobatches; ++mb)
      (lmLoss(net->forward(xs.narrow(0, mb * size, size)), ys.narrow(0, mb * size, size)) / kMicrobatches).backward();
    grads.push_back(gradsOf(*net));
  }
  torch::NoGradGuard noGrad;
  for (auto& p : net->named_parameters(true)) {  // "head.weight" is "embed.weight": the same tensor
    torch::Tensor g = grads[0].at(p.key());
    for (int r = 1; r < replicas; ++r) g = g + grads[static_cast<size_t>(r)].at(p.key());
    if (replicas > 1) g = g / replicas;
    p.value().mutable_grad() = g;
  }
}

void trainAndCompare(const Case& c) {
  const int replicas = strata::size() / c.partitions;
  torch::manual_seed(77);
  DistributedModel one(tinyLm(kBlocks), tokenBatch(0, kBatch).first, singleProcess());
  torch::nn::Sequential reference = plainTinyLm(kBlocks, stateOf(one));
  // One tensor in the plain model: the optimizer must see it once.
  std::vector<torch::Tensor> unique;
  for (auto& p : reference->named_parameters(true))
    if (p.key() != "head.weight") unique.push_back(p.value());
  auto refOpt = sgd(unique);

  torch::manual_seed(77);
  DistributedModelOptions options;
  options.modelParallel = c10::str(R"({"enabled": true, "partitions": )", c.partitions, R"(, "microbatches": )",
                                   kMicrobatches, R"(, "pipeline": ")", c.pipeline, R"(", "ddp": )",
                                   replicas > 1 ? "true" : "false", R"(, "virtual_stages": )", c.virtualStages, "}");
  DistributedModel model(tinyLm(kBlocks), tokenBatch(0, kBatch).first, options);
  DistributedOptimizer opt(sgd(model.parameters()), model);
  const auto cut = model.pipeline_stats().stageFirstLayer;
  ASSERT_GT(cut.back(), 0);  // the head's stage is not the embedding's: the tie spans stages
  const int me = model.dp_rank();
  for (int step = 0; step < c.steps; ++step) {
    referenceStep(reference, refOpt, step, replicas);
    const auto [x, y] = tokenBatch(step, kBatch * replicas);
    opt.zero_grad();
    model.step(x.narrow(0, kBatch * me, kBatch), y.narrow(0, kBatch * me, kBatch), lmStep);
    int compared = 0;
    const auto refParams = reference->named_parameters(true);
    for (const auto& p : model.module()->named_parameters(true)) {
      const torch::Tensor& mine = p.value();
      const torch::Tensor& theirs = *refParams.find(p.key());
      ASSERT_TRUE(mine.grad().defined() || p.key() == "head.weight") << p.key() << " has no gradient";
      // A rank holding both uses holds one tensor (the head's use reads the embedding's).
      const torch::Tensor grad = mine.grad().defined() ? mine.grad() : model.module()->named_parameters(true)["embed.weight"].grad();
      EXPECT_TRUE(torch::equal(grad, theirs.grad()))
          << "step " << step << " " << p.key() << " gradient differs by " << (grad - theirs.grad()).abs().max().item<double>();
      ++compared;
    }
    EXPECT_GT(compared, 0);
    refOpt.step();
    opt.step();
  }
  // Every parameter this rank holds, the head's copy of the embedding included, equals the
  // one process's bitwise: so the two copies are equal too.
  const auto refParams = reference->named_parameters(true);
  for (const auto& p : model.module()->named_parameters(true))
    EXPECT_TRUE(torch::equal(p.value(), *refParams.find(p.key()))) << p.key() << " after " << c.steps << " steps";
}

TEST(TiedAcrossStages, SimpleScheduleMatchesOneProcess) { trainAndCompare({strata::size(), 1, "simple"}); }

TEST(TiedAcrossStages, InterleavedScheduleMatchesOneProcess) { trainAndCompare({strata::size(), 1, "interleaved"}); }

// Split backward: the contributions travel around W, where the gradients are made.
TEST(TiedAcrossStages, ZeroBubbleScheduleMatchesOneProcess) { trainAndCompare({strata::size(), 1, "zero_bubble"}); }

TEST(TiedAcrossStages, VirtualStagesMatchOneProcess) { trainAndCompare({2, 2, "interleaved", 2}); }

TEST(TiedAcrossStages, HybridWithDataParallelReplicasMatchesOneProcess) {
  // np 2: one pipeline of 2 stages; np 4: 2 pipelines x 2 replicas.
  trainAndCompare({2, 1, "interleaved", 2});
}

// One process: the LayerList's tie is one tensor, listed once, with the plain model's gradients.
TEST(TiedAcrossStages, OneProcessHoldsOneTensor) {
  torch::manual_seed(5);
  DistributedModel one(tinyLm(2), tokenBatch(0, kBatch).first, singleProcess());
  torch::nn::Sequential reference = plainTinyLm(2, stateOf(one));
  const auto params = one.module()->named_parameters(true);
  EXPECT_EQ(params["embed.weight"].data_ptr(), params["head.weight"].data_ptr());
  EXPECT_EQ(one.parameters().size(), reference->parameters().size() - 1);
  const auto [x, y] = tokenBatch(1, kBatch);
  lmStep(one, x, y);
  lmLoss(reference->forward(x), y).backward();
  EXPECT_TRUE(torch::equal(params["embed.weight"].grad(), reference->named_parameters(true)["embed.weight"].grad()));
}

}  // namespace ties_test
}  // namespace strata::testing
