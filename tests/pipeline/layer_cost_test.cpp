// Layer profiles: JSON round trip, field-naming errors, the example profile in the repo.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "core/errors.h"
#include "pipeline/layer_cost.h"
#include "testing/config_error.h"

namespace strata::pipeline {
namespace {

using nlohmann::json;

std::string errorOf(const json& doc) {
  return strata::testing::configErrorOf([&] { layerProfileFromJson(doc, "p.json"); });
}

TEST(LayerProfile, JsonRoundTrip) {
  std::vector<LayerCost> layers(2);
  layers[0] = {"embed", 0.0015, 0.003, 4096, 4096, 8192, 1024, 2048, 3};
  layers[1] = {"head", 0.25, 0.5, 1, 2, 3, 4, 5, 3};
  const std::vector<LayerCost> back = layerProfileFromJson(layerProfileToJson(layers), "mem");
  ASSERT_EQ(back.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back[i].name, layers[i].name);
    EXPECT_DOUBLE_EQ(back[i].forwardSeconds, layers[i].forwardSeconds);
    EXPECT_DOUBLE_EQ(back[i].backwardSeconds, layers[i].backwardSeconds);
    EXPECT_EQ(back[i].parameterBytes, layers[i].parameterBytes);
    EXPECT_EQ(back[i].gradientBytes, layers[i].gradientBytes);
    EXPECT_EQ(back[i].optimizerStateBytes, layers[i].optimizerStateBytes);
    EXPECT_EQ(back[i].activationBytes, layers[i].activationBytes);
    EXPECT_EQ(back[i].stashBytes, layers[i].stashBytes);
    EXPECT_EQ(back[i].tieGroup, 3);
  }
  EXPECT_EQ(back[0].staticBytes(), 4096u + 4096u + 8192u);
}

TEST(LayerProfile, WeightGradientRoundTripsAndIsPartOfTheBackward) {
  std::vector<LayerCost> layers(2);
  layers[0].name = "fc1";
  layers[0].backwardSeconds = 0.004;
  layers[0].weightGradientSeconds = 0.0025;
  layers[1].name = "relu";  // not measured: absent from the JSON, the default share
  layers[1].backwardSeconds = 0.002;
  const json doc = layerProfileToJson(layers);
  EXPECT_FALSE(doc.at("layers").at(1).contains("weight_gradient_ms"));
  const std::vector<LayerCost> back = layerProfileFromJson(doc, "mem");
  EXPECT_NEAR(back[0].weightGradientSeconds, 0.0025, 1e-15);
  EXPECT_DOUBLE_EQ(back[1].weightGradientSeconds, -1);
  EXPECT_DOUBLE_EQ(back[1].weightGradientOrDefault(), 0.001);
  const std::string e = errorOf(json{{"layers", {{{"name", "fc1"}, {"backward_ms", 2}, {"weight_gradient_ms", 3}}}}});
  EXPECT_NE(e.find("p.json: layers[0]: \"weight_gradient_ms\" 3 exceeds \"backward_ms\" 2"), std::string::npos) << e;
}

TEST(LayerProfile, FileRoundTripAndMissingFile) {
  const std::string path = ::testing::TempDir() + "strata_layer_profile_test.json";
  writeLayerProfile(path, uniformLayers(3, 0.001, 0.002, 64, 128));
  const auto back = readLayerProfile(path);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[2].name, "layer2");
  EXPECT_EQ(back[1].parameterBytes, 128u);
  std::remove(path.c_str());
  EXPECT_THROW(readLayerProfile(path), ConfigError);
}

TEST(LayerProfile, ErrorsNameTheFieldAndValue) {
  EXPECT_NE(errorOf(json::array()).find("a layer profile is an object with a \"layers\" array"), std::string::npos);
  EXPECT_NE(errorOf({{"layers", json::array()}}).find("\"layers\" is empty"), std::string::npos);
  EXPECT_NE(errorOf({{"layers", {{{"forward_ms", 1}}}}}).find("layers[0]: \"name\" (a string) is required"),
            std::string::npos);
  EXPECT_NE(errorOf({{"layers", {{{"name", "a"}, {"forward_ms", -1}}}}}).find("\"forward_ms\" must be >= 0, got -1"),
            std::string::npos);
  EXPECT_NE(errorOf({{"layers", {{{"name", "a"}, {"stash_bytes", 1.5}}}}}).find("\"stash_bytes\" must be a byte count"),
            std::string::npos);
  EXPECT_NE(errorOf({{"layers", {{{"name", "a"}, {"fwd_ms", 1}}}}}).find("layers[0]: unknown key \"fwd_ms\""),
            std::string::npos);
  EXPECT_NE(errorOf({{"layers", {{{"name", "a"}, {"tie_group", -2}}}}}).find("\"tie_group\" must be an integer >= -1"),
            std::string::npos);
  EXPECT_NE(errorOf({{"layers", {{{"name", "a"}}}}, {"extra", 1}}).find("unknown key \"extra\""), std::string::npos);
}

TEST(LayerProfile, LinkFromJson) {
  const json doc = {{"layers", {{{"name", "a"}}}}, {"link", {{"latency_us", 50}, {"bandwidth_gbps", 8}}}};
  const LinkModel link = linkFromJson(doc, "p.json", {});
  EXPECT_DOUBLE_EQ(link.latencySeconds, 50e-6);
  EXPECT_DOUBLE_EQ(link.bytesPerSecond, 1e9);
  EXPECT_DOUBLE_EQ(link.transferSeconds(1'000'000), 50e-6 + 1e-3);
  const LinkModel fallback = linkFromJson({{"layers", json::array()}}, "p.json", link);
  EXPECT_DOUBLE_EQ(fallback.latencySeconds, 50e-6);
  EXPECT_THROW(linkFromJson({{"link", {{"bandwidth_gbps", 0}}}}, "p.json", {}), ConfigError);
  EXPECT_THROW(linkFromJson({{"link", {{"latency", 1}}}}, "p.json", {}), ConfigError);
  LinkModel bad;
  bad.bytesPerSecond = 0;
  EXPECT_THROW(validateLink(bad), ConfigError);
  bad = {};
  bad.latencySeconds = -1;
  EXPECT_THROW(validateLink(bad), ConfigError);
  EXPECT_NO_THROW(validateLink(LinkModel{}));
  EXPECT_DOUBLE_EQ(LinkModel{}.transferSeconds(1 << 30), 0.0);  // unlimited and instant by default
}

TEST(LayerProfile, TheExampleProfileParses) {
  const std::string path = std::string(STRATA_SOURCE_DIR) + "/examples/pipeline/layers_example.json";
  const auto layers = readLayerProfile(path);
  ASSERT_EQ(layers.size(), 11u);
  EXPECT_EQ(layers.front().name, "embed");
  EXPECT_EQ(layers.back().name, "lm_head");
  EXPECT_DOUBLE_EQ(layers[1].forwardSeconds, 0.012);
}

TEST(LayerProfile, UniformLayers) {
  const auto layers = uniformLayers(4, 0.01, 0.02, 100);
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers[3].stashBytes, 100u);
  EXPECT_THROW(uniformLayers(0, 1, 1, 1), ConfigError);
}

}  // namespace
}  // namespace strata::pipeline
