// Partial checkpoints by parameter path in one process (part of checkpoint_roundtrip_test):
// a tied weight is stored once and its optimizer state found through the alias; an optimizer
// of another kind is refused naming both; an optimizer without per-parameter state keeps its
// positional archive and resumes on the same layout. Across layouts (pipelines of 4 and 2
// stages, data parallel, one process): example_transformer_lm_checkpoint.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "adapter/checkpoint/tensor_shard.h"
#include "strata/checkpoint.h"
#include "strata/layer_list.h"
#include "strata/strata.h"
#include "test_job.h"

namespace {

using namespace strata_test;  // NOLINT: the shared test job

// Tokens -> embedding -> a head whose weight is the embedding's (tied), as a LayerList.
strata::LayerList tiedModel() {
  strata::LayerList list;
  list.add("embed", [] { return torch::nn::Embedding(10, 4); })
      .add("head", [] { return torch::nn::Linear(torch::nn::LinearOptions(4, 10).bias(false)); })
      .tie("embed.weight", "head.weight");
  return list;
}

struct TiedJob {
  torch::Tensor tokens = torch::randint(0, 10, {6, 3}, torch::kInt64);
  strata::DistributedModel model{tiedModel(), tokens};
  strata::DistributedOptimizer opt{torch::optim::AdamW(model.parameters(), torch::optim::AdamWOptions(0.05)), model};

  void train(int steps) {
    for (int i = 0; i < steps; ++i) {
      opt.zero_grad();
      model.step(tokens, tokens, [](strata::DistributedModel& m, const torch::Tensor& x, const torch::Tensor& y) {
        torch::Tensor loss = torch::nn::functional::cross_entropy(m(x).reshape({-1, 10}), y.reshape({-1}));
        m.backward(loss);
        return loss;
      });
      opt.step();
    }
  }
  torch::Tensor weight() { return model.module()->named_parameters(true)["embed.weight"]; }
  torch::optim::AdamWParamState& adam() {
    auto& state = opt.optimizer().state();
    return static_cast<torch::optim::AdamWParamState&>(
        *state.at(c10::guts::to_string(model.parameters().front().unsafeGetTensorImpl())));
  }
};

strata::SaveOptions partialAt(int64_t step) {
  strata::SaveOptions so;
  so.partial = true;
  so.step = step;
  return so;
}

class ByPathTied : public ::testing::TestWithParam<Mode> {};

// Synchronous saves write the live tensors; background ones the snapshot's copies, where the
// alias must point at its target's copy.
TEST_P(ByPathTied, ATiedWeightIsStoredOnceAndItsOptimizerStateFollowsTheAlias) {
  const std::string root = tempRoot() + "/by-path-tied-" + modeName({GetParam(), 0});
  TiedJob job;
  ASSERT_EQ(job.model.parameters().size(), 1u);  // one tensor for both uses
  job.train(2);
  std::string dir;
  if (GetParam() == Mode::kSync) {
    dir = strata::save(root, job.model, job.opt, partialAt(2));
  } else {
    strata::CheckpointManager manager(job.model, job.opt, nullptr, asyncOptions(root, /*keep=*/0, /*partial=*/true));
    ASSERT_TRUE(manager.async());
    dir = manager.save(2);
    manager.wait();
  }
  const torch::Tensor saved = job.weight().detach().clone();
  const torch::Tensor savedMoment = job.adam().exp_avg().clone();

  strata::detail::TensorShardReader shard(dir + "/rank-00000.pt");
  std::map<std::string, std::string> aliasOf;
  for (const auto& e : shard.index().tensors) aliasOf[e.path] = e.aliasOf;
  ASSERT_EQ(aliasOf.size(), 2u);
  EXPECT_EQ(aliasOf["embed.weight"], "");
  EXPECT_EQ(aliasOf["head.weight"], "embed.weight");
  EXPECT_EQ(shard.index().optimizerKind, "AdamW");
  ASSERT_EQ(shard.index().optimizer.size(), 1u);  // the tensor's state once
  EXPECT_EQ(shard.index().optimizer[0].path, "embed.weight");

  job.train(2);  // everything moves on
  EXPECT_FALSE(torch::equal(saved, job.weight()));
  ASSERT_TRUE(strata::load(root, job.model, job.opt));
  EXPECT_TRUE(torch::equal(saved, job.weight()));
  EXPECT_TRUE(torch::equal(savedMoment, job.adam().exp_avg()));
  EXPECT_EQ(job.adam().step(), 2);
}

INSTANTIATE_TEST_SUITE_P(Checkpoint, ByPathTied, ::testing::Values(Mode::kSync, Mode::kAsync), modeName);

TEST(ByPath, AnotherOptimizerKindIsRefusedNamingBoth) {
  const std::string root = tempRoot() + "/by-path-kind";
  Job adam;  // makeAdam
  adam.train(1);
  strata::save(root, adam.model, adam.opt, partialAt(1));
  Job sgd([](std::vector<torch::Tensor> p) {
    return std::make_unique<torch::optim::SGD>(std::move(p), torch::optim::SGDOptions(0.1).momentum(0.9));
  });
  try {
    strata::load(root, sgd.model, sgd.opt);
    ADD_FAILURE() << "Adam state loaded into SGD";
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds Adam optimizer state; this optimizer is SGD"), std::string::npos)
        << e.what();
  }
}

TEST(ByPath, AnOptimizerWithoutPerParameterStateResumesOnTheSameLayout) {
  const std::string root = tempRoot() + "/by-path-lbfgs";
  auto lbfgs = [](std::vector<torch::Tensor> p) {
    return std::make_unique<torch::optim::LBFGS>(std::move(p), torch::optim::LBFGSOptions(0.1));
  };
  Job job(lbfgs);
  const std::string dir = strata::save(root, job.model, job.opt, partialAt(3));
  strata::detail::TensorShardReader shard(dir + "/rank-00000.pt");
  EXPECT_EQ(shard.index().optimizerKind, "");  // kept as optimizer.save()'s archive
  const torch::Tensor saved = job.net->parameters()[0].detach().clone();
  {
    torch::NoGradGuard noGrad;
    job.net->parameters()[0].add_(1.0);
  }
  const auto loaded = strata::load(root, job.model, job.opt);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->step, 3);
  EXPECT_TRUE(torch::equal(saved, job.net->parameters()[0]));
}

}  // namespace
