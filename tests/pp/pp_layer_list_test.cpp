// Models described as a LayerList: each rank builds only its own layers, the initial values
// do not depend on the partition, tied embedding and head on different stages train exactly
// as one process (gradients bitwise equal at every step, both copies bitwise equal), in both
// schedules, with virtual stages and with data-parallel replicas. Under mpirun -np 2 and
// -np 4 (pure pipelines of size() stages and hybrids of 2-stage pipelines).
#include <gtest/gtest.h>

#include <filesystem>

#include "pp/pp_layer_list_testing.h"
#include "strata/checkpoint.h"
#include "strata/nested_sequential.h"

namespace strata::testing {
namespace {

struct Layout {
  int partitions = 2;
  int virtualStages = 1;
  std::string pipeline = "interleaved";
  int microbatches = 4;
};

std::string configFor(const Layout& l) {
  const int replicas = strata::size() / l.partitions;
  return c10::str(R"({"enabled": true, "partitions": )", l.partitions, R"(, "microbatches": )", l.microbatches,
                  R"(, "pipeline": ")", l.pipeline, R"(", "ddp": )", replicas > 1 ? "true" : "false",
                  R"(, "virtual_stages": )", l.virtualStages, "}");
}

DistributedModelOptions pipelined(const Layout& l) {
  DistributedModelOptions o;
  o.modelParallel = configFor(l);
  return o;
}

constexpr int64_t kBatch = 8;  // per pipeline replica and step

TEST(LayerListModel, InitialWeightsDoNotDependOnThePartition) {
  // The example batch first: tokenBatch() seeds the generator, and the model's seed is the
  // generator's seed when the model is constructed.
  const torch::Tensor example = tokenBatch(0, kBatch).first;
  for (const Layout& layout : {Layout{strata::size()}, Layout{2, 2}}) {
    torch::manual_seed(42);
    DistributedModel one(tinyLm(6), example, singleProcess());
    torch::manual_seed(42);
    DistributedModel piped(tinyLm(6), example, pipelined(layout));
    const auto reference = stateOf(one);
    const auto mine = stateOf(piped);
    ASSERT_FALSE(mine.empty());
    for (const auto& [path, value] : mine) {
      ASSERT_TRUE(reference.count(path)) << path;
      EXPECT_TRUE(torch::equal(value, reference.at(path))) << path << " differs (partitions " << layout.partitions
                                                           << ", virtual stages " << layout.virtualStages << ")";
    }
    // Another seed, another model: the values come from the seed.
    torch::manual_seed(43);
    DistributedModel other(tinyLm(6), example, singleProcess());
    EXPECT_FALSE(torch::equal(stateOf(other).at("embed.weight"), reference.at("embed.weight")));
  }
}

TEST(LayerListModel, ARankBuildsOnlyItsOwnLayers) {
  const Layout layout{strata::size()};
  torch::manual_seed(1);
  DistributedModel model(tinyLm(6), tokenBatch(0, kBatch).first, pipelined(layout));
  const PipelineStats stats = model.pipeline_stats();
  ASSERT_EQ(stats.stageFirstLayer.size(), static_cast<size_t>(layout.partitions));
  // Layers in execution order: embed, blocks.0 .. blocks.5, head.
  std::vector<std::string> layerOf{"embed"};
  for (int i = 0; i < 6; ++i) layerOf.push_back("blocks." + std::to_string(i));
  layerOf.push_back("head");
  const int me = model.pp_rank();
  const int first = stats.stageFirstLayer[static_cast<size_t>(me)];
  const int end = me + 1 < layout.partitions ? stats.stageFirstLayer[static_cast<size_t>(me) + 1] : 8;
  std::set<std::string> expected;
  for (int i = first; i < end; ++i) expected.insert(layerOf[static_cast<size_t>(i)]);
  size_t count = 0;
  for (const auto& p : model.module()->named_parameters(true)) {
    const std::string path = p.key();
    const std::string layer = path.rfind("blocks.", 0) == 0 ? path.substr(0, path.find('.', 7)) : path.substr(0, path.find('.'));
    EXPECT_TRUE(expected.count(layer)) << "rank " << strata::rank() << " holds " << path << " of layer " << layer
                                       << " outside its layers " << first << ".." << end - 1;
    ++count;
  }
  EXPECT_GT(count, 0u);
  EXPECT_EQ(model.local_parameters().size(), model.parameters().size());
  // The parameter elements it holds are exactly its layers' (each built alone here), the tied
  // tensor once: nothing of another stage exists on this rank.
  const std::vector<LayerList::Layer> described = tinyLm(6).layers();
  int64_t expectedElements = 0;
  for (int i = first; i < end; ++i)
    for (const auto& p : described[static_cast<size_t>(i)].factory().ptr()->parameters()) expectedElements += p.numel();
  if (first == 0 && end == 8) expectedElements -= kVocab * kWidth;  // embed and head on one rank: one tensor
  int64_t heldElements = 0;
  for (const auto& p : model.local_parameters()) heldElements += p.numel();
  EXPECT_EQ(heldElements, expectedElements) << "rank " << strata::rank() << " layers " << first << ".." << end - 1;
}

}  // namespace
}  // namespace strata::testing

namespace strata::testing {
namespace {

DistributedModelOptions pipeOfAll(const std::string& extra = "") {
  DistributedModelOptions o;
  o.modelParallel = c10::str(R"({"enabled": true, "partitions": )", strata::size(), R"(, "microbatches": 2)", extra, "}");
  return o;
}

TEST(LayerListBadInput, AFactoryThatThrowsFailsEveryRank) {
  LayerList broken;
  broken.add<torch::nn::Embedding>("embed", kVocab, kWidth);
  for (int i = 0; i < 3; ++i) broken.add("block" + std::to_string(i), [] { return makeBlock(); });
  broken.add("bad", []() -> torch::nn::Linear { throw std::runtime_error("factory out of order"); });
  expectErrorEverywhere<Error>(
      [&] { DistributedModel m(broken, tokenBatch(0, 8).first, pipeOfAll()); },
      {"the factory of layer \"bad\"", "factory out of order"});
}

TEST(LayerListBadInput, AFactoryThatThrowsOnOneRankOnlyFailsEveryRank) {
  // Each rank profiles the layers of its provisional block (owner_profile.h): the last rank's
  // holds the head, whose factory fails there only; every other rank must fail too.
  const int last = strata::size() - 1;
  LayerList lm;
  lm.add<torch::nn::Embedding>("embed", kVocab, kWidth);
  for (int i = 0; i < 3; ++i) lm.add("block" + std::to_string(i), [] { return makeBlock(); });
  lm.add("head", [last] {
    if (strata::rank() == last) throw std::runtime_error("no memory left on this host");
    return torch::nn::Linear(kWidth, kVocab);
  });
  expectErrorEverywhere<Error>([&] { DistributedModel m(lm, tokenBatch(0, 8).first, pipeOfAll()); },
                               {"rank " + std::to_string(last), "the factory of layer \"head\"",
                                "no memory left on this host"});
}

TEST(LayerListBadInput, ATieOfDifferentShapesFailsEveryRank) {
  LayerList lm;
  lm.add<torch::nn::Embedding>("embed", kVocab, kWidth);
  for (int i = 0; i < 3; ++i) lm.add("block" + std::to_string(i), [] { return makeBlock(); });
  lm.add("head", [] { return torch::nn::Linear(torch::nn::LinearOptions(kWidth, kVocab + 1).bias(false)); })
      .tie("embed.weight", "head.weight");
  expectErrorEverywhere<ConfigError>([&] { DistributedModel m(lm, tokenBatch(0, 8).first, pipeOfAll()); },
                                     {"\"embed.weight\" is [11, 8] Float but \"head.weight\" is [12, 8] Float",
                                      "same shape and dtype"});
}

TEST(LayerListBadInput, AMemoryCapNoPartitionMeetsFailsEveryRank) {
  expectErrorEverywhere<ConfigError>(
      [&] { DistributedModel m(tinyLm(4), tokenBatch(0, 8).first, pipeOfAll(R"(, "memory_cap_mb": 0.001)")); },
      {"/modelparallel: no partition", "memory cap of 1.02 KiB", "smallest achievable peak stage memory"});
}

TEST(LayerListBadInput, ALayerThatTakesTwoTensorsFailsEveryRank) {
  struct PairImpl : torch::nn::Module {
    torch::Tensor forward(const torch::Tensor& a, const torch::Tensor& b) { return a + b; }
  };
  LayerList lm = tinyLm(4, false);
  lm.add("pair", [] { return std::make_shared<PairImpl>(); });
  expectErrorEverywhere<Error>([&] { DistributedModel m(lm, tokenBatch(0, 8).first, pipeOfAll()); },
                               {"(\"pair\") failed", "every layer's forward takes one tensor"});
}

}  // namespace
}  // namespace strata::testing

namespace strata::testing {
namespace {

// A model users write: a custom module with its blocks in a ModuleList. Refused with what to
// change; its children in a Sequential (blocks nested) train, cut at block granularity.
struct BlockImpl : torch::nn::Module {
  BlockImpl() { fc = register_module("fc", torch::nn::Linear(kWidth, kWidth)); }
  torch::Tensor forward(const torch::Tensor& x) { return x + torch::tanh(fc->forward(x)); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Block);

struct GptImpl : torch::nn::Module {
  GptImpl() {
    embed = register_module("embed", torch::nn::Linear(3, kWidth));
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int i = 0; i < 4; ++i) blocks->push_back(Block());
    head = register_module("head", torch::nn::Linear(kWidth, 2));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = embed->forward(x);
    for (const auto& b : *blocks) x = b->as<BlockImpl>()->forward(x);
    return head->forward(x);
  }
  torch::nn::Linear embed{nullptr}, head{nullptr};
  torch::nn::ModuleList blocks{nullptr};
};
TORCH_MODULE(Gpt);

TEST(NestedModels, AModuleListIsRefusedWithWhatToChange) {
  torch::manual_seed(3);
  Gpt gpt;
  expectErrorEverywhere<ConfigError>([&] { DistributedModel m(gpt, pipeOfAll()); },
                                     {"/modelparallel/enabled", "the model is a", "blocks (ModuleList of 4",
                                      "Put the ModuleList \"blocks\" in a strata::NestedSequential",
                                      "strata::LayerList"});
}

TEST(NestedModels, ANestedSequentialIsCutAtBlockGranularityAndMatchesOneProcess) {
  torch::manual_seed(3);
  Gpt gpt;
  strata::NestedSequential blocks;  // libtorch cannot nest a plain Sequential
  for (size_t i = 0; i < gpt->blocks->size(); ++i)
    blocks->push_back(std::to_string(i), std::dynamic_pointer_cast<BlockImpl>(gpt->blocks[i]));
  torch::nn::Sequential net;
  net->push_back("embed", gpt->embed);
  net->push_back("blocks", torch::nn::AnyModule(blocks.ptr()));
  net->push_back("head", gpt->head);
  torch::manual_seed(3);
  Gpt reference;  // the same weights, in one process
  DistributedModel model(net, pipeOfAll());
  torch::manual_seed(11);
  const torch::Tensor x = torch::randn({8, 3}), y = torch::randn({8, 2});
  model.step(x, y, mseStep);
  // Layers "embed", "blocks.0" .. "blocks.3", "head": every stage starts at a block boundary.
  EXPECT_EQ(model.pipeline_stats().stageFirstLayer.size(), static_cast<size_t>(strata::size()));
  // The user's paths, and the gradients of one process running the same two microbatches.
  const auto local = model.local_state_dict();
  ASSERT_FALSE(local.is_empty());
  for (const auto& item : local)  // "embed.*", "blocks.<i>.fc.*" or "head.*": the user's paths
    EXPECT_TRUE(item.key().rfind("embed.", 0) == 0 || item.key().rfind("head.", 0) == 0 ||
                (item.key().rfind("blocks.", 0) == 0 && item.key().find(".fc.") != std::string::npos))
        << item.key();
  for (int mb = 0; mb < 2; ++mb)
    (torch::mse_loss(reference->forward(x.narrow(0, 4 * mb, 4)), y.narrow(0, 4 * mb, 4)) / 2).backward();
  const auto refParams = reference->named_parameters(true);
  for (const auto& item : local) {
    ASSERT_TRUE(refParams.contains(item.key())) << item.key();
    EXPECT_TRUE(torch::equal(item.value().grad(), refParams[item.key()].grad())) << item.key();
  }
}


// An SGD subclass: its state may be its own, so Strata does not key it by parameter path.
struct UserSgd : torch::optim::SGD {
  using torch::optim::SGD::SGD;
};

TEST(LayerListBadInput, AFullCheckpointOfAnOptimizerWithoutPerParameterStateFailsEveryRankBeforeWriting) {
  torch::manual_seed(1);
  const auto [x, y] = tokenBatch(0, 8);
  DistributedModel model(tinyLm(4), x, pipeOfAll());
  DistributedOptimizer opt(UserSgd(model.parameters(), torch::optim::SGDOptions(0.1)), model);
  opt.zero_grad();
  model.step(x, y, lmStep);
  opt.step();
  // Each rank its own directory: the refusal comes before anything is written.
  const std::filesystem::path root = std::filesystem::temp_directory_path() /
                                     ("strata-pp-full-refused-" + std::to_string(getpid()));
  expectErrorEverywhere<Error>([&] { strata::save(root.string(), model, opt); },
                               {"full checkpoint of a " + std::to_string(strata::size()) + "-stage pipeline",
                                "by parameter path", "{.partial = true}"});
  EXPECT_FALSE(std::filesystem::exists(root)) << "a refused save created " << root;
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace strata::testing
