// The single-process parts of the pipeline adapter: building a LayerList layer by layer
// (seeds, module tree, ties), nested Sequentials as layers, and the layer profile (stash
// bytes, shapes, the block run as a stage runs it, tie checks).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core/errors.h"
#include "pipeline/adapter/model_builder.h"
#include "pipeline/adapter/profile.h"
#include "strata/nested_sequential.h"

namespace strata::pipeline {
namespace {

LayerList smallList() {
  LayerList blocks;
  blocks.add<torch::nn::Linear>("0", 8, 8).add<torch::nn::Linear>("1", 8, 8);
  LayerList list;
  list.add<torch::nn::Linear>("in", 4, 8).add("blocks", blocks).add<torch::nn::Tanh>("act").add(
      "out", [] { return torch::nn::Linear(8, 4); });
  return list;
}

template <typename Fn>
std::string errorOf(Fn fn) {
  try {
    fn();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "no error";
}

bool contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

TEST(ModelBuilder, PathsAndModuleTreeFollowTheList) {
  const ModelBuilder builder(smallList(), 7);
  ASSERT_EQ(builder.numLayers(), 5);
  EXPECT_EQ(builder.path(1), "blocks.0");
  EXPECT_EQ(builder.path(2), "blocks.1");
  std::vector<torch::nn::AnyModule> built(5);
  built[0] = builder.build(0);
  built[2] = builder.build(2);  // a rank holding "in" and "blocks.1" only
  torch::nn::Sequential root = builder.assemble(built);
  std::vector<std::string> keys;
  for (const auto& p : root->named_parameters(true)) keys.push_back(p.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"in.weight", "in.bias", "blocks.1.weight", "blocks.1.bias"}));
}

TEST(ModelBuilder, ALayersValuesDependOnTheSeedAndItsPathOnly) {
  const ModelBuilder builder(smallList(), 7);
  torch::manual_seed(1);
  const torch::Tensor before = torch::rand({3});
  torch::manual_seed(1);
  const torch::Tensor late = builder.build(2).ptr()->parameters()[0].clone();  // blocks.1 first ...
  const torch::Tensor early = builder.build(1).ptr()->parameters()[0].clone();
  EXPECT_TRUE(torch::equal(builder.build(2).ptr()->parameters()[0], late));  // ... or after others: same
  EXPECT_FALSE(torch::equal(early, late));  // blocks.0 and blocks.1 differ
  EXPECT_TRUE(torch::equal(torch::rand({3}), before)) << "building moved the default generator";
  EXPECT_FALSE(torch::equal(ModelBuilder(smallList(), 8).build(2).ptr()->parameters()[0], late));
  EXPECT_NE(initSeed(7, "blocks.1"), initSeed(7, "blocks.0"));
  EXPECT_NE(initSeed(7, "blocks.1"), initSeed(8, "blocks.1"));
}

TEST(ModelBuilder, BadDescriptionsAreClearErrors) {
  LayerList list = smallList();
  list.tie("in.weight", "nowhere.weight");
  EXPECT_TRUE(contains(errorOf([&] { ModelBuilder(list, 1); }), "\"nowhere.weight\" is not a parameter of any layer"));
  EXPECT_TRUE(contains(errorOf([] { LayerList().add<torch::nn::Tanh>("a.b"); }), "without '.'"));
  EXPECT_TRUE(contains(errorOf([] { LayerList().add<torch::nn::Tanh>("a").add<torch::nn::Tanh>("a"); }),
                       "two entries are named \"a\""));
  EXPECT_TRUE(contains(errorOf([] { ModelBuilder(LayerList(), 1); }), "no layers"));
  LayerList throwing;
  throwing.add("boom", []() -> torch::nn::Linear { throw std::runtime_error("out of coffee"); });
  EXPECT_TRUE(contains(errorOf([&] { ModelBuilder(throwing, 1).build(0); }),
                       "the factory of layer \"boom\" (layer 0) threw: out of coffee"));
}

TEST(ModelBuilder, TiedUsesOnOneRankAreOneTensorWithOneGradient) {
  LayerList list;
  list.add<torch::nn::Linear>("a", torch::nn::LinearOptions(6, 6).bias(false))
      .add<torch::nn::Tanh>("act")
      .add<torch::nn::Linear>("b", torch::nn::LinearOptions(6, 6).bias(false))
      .tie("a.weight", "b.weight");
  const ModelBuilder builder(list, 3);
  ASSERT_EQ(builder.ties().size(), 1u);
  std::vector<Layer> layers;
  for (int i = 0; i < 3; ++i) layers.push_back({builder.path(i), builder.build(i)});
  const auto handles = shareTiedTensors(layers, builder.ties());
  torch::Tensor a = tiedParameter(layers, {0, "weight"}), b = tiedParameter(layers, {2, "weight"});
  EXPECT_EQ(a.data_ptr(), b.data_ptr());
  // The same gradient as one tensor used twice in plain libtorch.
  const torch::Tensor shared = a.detach().clone().requires_grad_(true);
  const torch::Tensor x = torch::randn({5, 6});
  torch::matmul(torch::tanh(torch::matmul(x, shared.t())), shared.t()).sum().backward();
  runLayers(layers, 0, 3, x, nullptr).sum().backward();
  EXPECT_TRUE(torch::equal(a.grad(), shared.grad()));
  EXPECT_FALSE(b.grad().defined());  // accumulated into a's
}

TEST(Layers, NestedSequentialsContributeTheirItems) {
  strata::NestedSequential blocks(torch::nn::Linear(4, 4), torch::nn::Tanh());
  torch::nn::Sequential net;
  net->push_back("embed", torch::nn::Linear(3, 4));
  net->push_back("blocks", torch::nn::AnyModule(blocks.ptr()));
  net->push_back("head", torch::nn::Linear(4, 2));
  const std::vector<Layer> layers = layersOf(net);
  std::vector<std::string> names;
  for (const auto& l : layers) names.push_back(l.name);
  EXPECT_EQ(names, (std::vector<std::string>{"embed", "blocks.0", "blocks.1", "head"}));
  const torch::Tensor x = torch::randn({2, 3});
  EXPECT_TRUE(torch::equal(runLayers(layers, 0, 4, x, nullptr), net->forward(x)));
}

TEST(Profile, StashBytesShapesAndEveryLayerBuiltOnce) {
  const ModelBuilder builder(smallList(), 5);
  int acquired = 0;
  auto acquire = [&](int i) {
    EXPECT_EQ(i, acquired++);
    return builder.build(i);
  };
  std::vector<std::string> names;
  for (int i = 0; i < builder.numLayers(); ++i) names.push_back(builder.path(i));
  ProfileOptions options;
  options.samples = 3;
  options.optimizerStateFactor = 1;
  const LayerProfile p = profileLayers(names, acquire, {}, torch::randn({16, 4}), options);
  ASSERT_EQ(p.costs.size(), 5u);
  EXPECT_EQ(p.shapes[0].sizes, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(p.shapes[4].sizes, (std::vector<int64_t>{16, 4}));
  EXPECT_EQ(p.costs[0].parameterBytes, (4u * 8 + 8) * 4);
  EXPECT_EQ(p.costs[0].gradientBytes, p.costs[0].parameterBytes);
  EXPECT_EQ(p.costs[0].optimizerStateBytes, p.costs[0].gradientBytes);
  EXPECT_EQ(p.costs[3].parameterBytes, 0u);  // tanh
  // A Linear keeps its output (its input and weight already exist); tanh keeps its output.
  EXPECT_EQ(p.costs[1].stashBytes, 16u * 8 * 4);
  EXPECT_EQ(p.costs[3].stashBytes, 16u * 8 * 4);
  EXPECT_EQ(p.costs[4].activationBytes, 16u * 4 * 4);
  for (const auto& c : p.costs) EXPECT_GE(c.forwardSeconds, 0);
  // The broadcast form gives the same numbers back.
  const LayerProfile back = profileFromJson(profileToJson(p));
  EXPECT_EQ(back.costs[1].stashBytes, p.costs[1].stashBytes);
  EXPECT_EQ(back.shapes[2].sizes, p.shapes[2].sizes);
}

// A layer that logs its forward and the gradient its output receives in backward.
struct RecorderImpl : torch::nn::Module {
  RecorderImpl(int index, double scale, std::vector<std::string>* log) : index(index), scale(scale), log(log) {
    weight = register_parameter("weight", torch::ones({1}));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    log->push_back(c10::str("F", index));
    torch::Tensor y = x * scale * weight;
    y.register_hook([this](const torch::Tensor& g) {
      log->push_back(c10::str("B", index, "=", g.mean().item<double>()));
      return g;
    });
    return y;
  }
  int index;
  double scale;
  std::vector<std::string>* log;
  torch::Tensor weight;
};
TORCH_MODULE(Recorder);

// The block runs as a stage runs it: forward through every layer, then backward through
// them in reverse, each layer fed the input gradient of the layer after it (here x3), not
// a fresh gradient of ones (which a layer profiled alone would get).
TEST(Profile, TheBlockRunsAsAStageRunsIt) {
  std::vector<std::string> log;
  std::vector<Recorder> layers = {Recorder(0, 2.0, &log), Recorder(1, 3.0, &log)};
  auto acquire = [&](int i) { return torch::nn::AnyModule(layers.at(static_cast<size_t>(i))); };
  ProfileOptions options;
  options.warmup = 1;
  options.samples = 1;
  options.splitBackward = false;
  const LayerProfile p = profileLayers({"a", "b"}, acquire, {}, torch::ones({4, 2}), options);
  EXPECT_EQ(log, (std::vector<std::string>{"F0", "F1", "B1=1", "B0=3", "F0", "F1", "B1=1", "B0=3"}));
  // The split backward (zero_bubble's B then W) is fed the same way.
  log.clear();
  options.splitBackward = true;
  (void)profileLayers({"a", "b"}, acquire, {}, torch::ones({4, 2}), options);
  ASSERT_GE(log.size(), 4u);
  EXPECT_EQ(std::count(log.begin(), log.end(), "B0=3"), std::count(log.begin(), log.end(), "F0"));
  EXPECT_EQ(std::count(log.begin(), log.end(), "B0=1"), 0);
  // Profiling leaves no gradient behind.
  for (auto& l : layers) EXPECT_FALSE(l->weight.grad().defined());
}

TEST(Profile, TiesAreCheckedAndPriced) {
  LayerList list;
  list.add<torch::nn::Embedding>("embed", 10, 4)
      .add("head", [] { return torch::nn::Linear(torch::nn::LinearOptions(4, 10).bias(false)); })
      .tie("embed.weight", "head.weight");
  ModelBuilder builder(list, 1);
  auto acquire = [&](int i) { return builder.build(i); };
  ProfileOptions options;
  options.samples = 0;
  const LayerProfile p = profileLayers({"embed", "head"}, acquire, builder.ties(), torch::zeros({2, 3}, torch::kLong),
                                       options);
  EXPECT_EQ(p.costs[0].tieGroup, 0);
  EXPECT_EQ(p.costs[1].tieGroup, 0);
  EXPECT_EQ(p.costs[1].tiedBytes, 10u * 4 * 4 * (1 + 1 + 2));  // parameter, gradient, Adam's two moments
  LayerList wrong;
  wrong.add<torch::nn::Embedding>("embed", 10, 4)
      .add("head", [] { return torch::nn::Linear(torch::nn::LinearOptions(4, 9).bias(false)); })
      .tie("embed.weight", "head.weight");
  ModelBuilder bad(wrong, 1);
  const std::string error = errorOf([&] {
    profileLayers({"embed", "head"}, [&](int i) { return bad.build(i); }, bad.ties(), torch::zeros({2, 3}, torch::kLong),
                  options);
  });
  EXPECT_TRUE(contains(error, "\"embed.weight\" is [10, 4] Float but \"head.weight\" is [9, 4] Float")) << error;
}

// What the ranks of a pipeline do: each profiles its block on the input the blocks before it
// computed (forwardLayers), the parts go through their gathered (JSON) form, and the merge
// equals profiling every layer in one place, ties included (the tie spans the parts).
TEST(Profile, PartsProfiledByTheirOwnersMergeToTheWholeProfile) {
  LayerList list;
  list.add<torch::nn::Embedding>("embed", 10, 4)
      .add("mix", [] { return torch::nn::Linear(4, 4); })
      .add("act", [] { return torch::nn::Tanh(); })
      .add("head", [] { return torch::nn::Linear(torch::nn::LinearOptions(4, 10).bias(false)); })
      .tie("embed.weight", "head.weight");
  const ModelBuilder builder(list, 3);
  std::vector<std::string> names;
  for (int i = 0; i < builder.numLayers(); ++i) names.push_back(builder.path(i));
  auto acquire = [&](int i) { return builder.build(i); };
  ProfileOptions options;
  options.samples = 0;
  const torch::Tensor sample = torch::randint(10, {6, 3});
  const LayerProfile whole = profileLayers(names, acquire, builder.ties(), sample, options);

  const std::vector<LayerRange> blocks = provisionalSplit(4, 3);  // {0,2} {2,3} {3,4}
  std::vector<PartialProfile> parts;
  torch::Tensor x = sample;
  for (const LayerRange& block : blocks) {
    parts.push_back(partialProfileFromJson(
        partialProfileToJson(profileLayerRange(names, acquire, builder.ties(), x, block, options))));
    x = forwardLayers(names, acquire, x, block);
  }
  std::swap(parts.front(), parts.back());  // gathered in any order
  const LayerProfile merged = mergeProfiles(parts, 4, builder.ties(), options);
  ASSERT_EQ(merged.costs.size(), whole.costs.size());
  for (size_t i = 0; i < whole.costs.size(); ++i) {
    const LayerCost &a = merged.costs[i], &b = whole.costs[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.parameterBytes, b.parameterBytes) << a.name;
    EXPECT_EQ(a.activationBytes, b.activationBytes) << a.name;
    EXPECT_EQ(a.stashBytes, b.stashBytes) << a.name;
    EXPECT_EQ(a.tieGroup, b.tieGroup) << a.name;
    EXPECT_EQ(a.tiedBytes, b.tiedBytes) << a.name;
    EXPECT_EQ(merged.shapes[i].sizes, whole.shapes[i].sizes) << a.name;
  }
  EXPECT_EQ(merged.costs[3].tieGroup, 0);
  // A missing part is an error, not a shorter table.
  parts.pop_back();
  EXPECT_THROW(mergeProfiles(parts, 4, builder.ties(), options), Error);
}

TEST(Profile, ALayerThatTakesTwoTensorsSaysWhatToChange) {
  struct PairImpl : torch::nn::Module {
    torch::Tensor forward(const torch::Tensor& a, const torch::Tensor& b) { return a + b; }
  };
  torch::nn::AnyModule pair(std::make_shared<PairImpl>());
  const std::string error = errorOf([&] {
    profileLayers({"pair"}, [&](int) { return pair; }, {}, torch::randn({2, 3}), ProfileOptions{});
  });
  EXPECT_TRUE(contains(error, "layer 0 (\"pair\") failed")) << error;
  EXPECT_TRUE(contains(error, "every layer's forward takes one tensor")) << error;
}

}  // namespace
}  // namespace strata::pipeline
