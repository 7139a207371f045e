// Wire compatibility: /usr/bin/python3 with Debian's python3-protobuf decodes our files with
// a .proto compiled for Python by protoc at test time, and checks the framing with its own
// CRC32C. Skips (with the reason) when python3, protoc or the protobuf module is missing.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "debugger/hook.h"
#include "debugger/naming.h"
#include "debugger_testing.h"

namespace strata::debugger {
namespace {

namespace fs = std::filesystem;
using testing::debuggerConfig;
using testing::TempDir;

// decode_events.py's JSON for the trial; null when the script found its environment
// incomplete (exit 2); any other failure is a test failure.
nlohmann::json decoded(const TempDir& trial, const TempDir& work) {
  std::string out;
  const int status = testing::decodeWithPython(trial.path(), work.path(), &out);
  if (status == 2) return nullptr;
  EXPECT_EQ(status, 0) << out;
  return nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
}

TEST(WireCompat, PythonProtobufDecodesOurEvents) {
  const std::string missing = testing::pythonDecoderMissing();
  if (!missing.empty()) GTEST_SKIP() << missing;
  ASSERT_TRUE(fs::exists(testing::kDecodeEventsScript)) << testing::kDecodeEventsScript;
  ASSERT_TRUE(fs::exists(testing::kEventProtos / "smdebug_event.proto")) << testing::kEventProtos;

  TempDir trial, work;
  {
    Hook hook(debuggerConfig(R"({"save_interval": 1, "collections": [
        {"name": "weights"}, {"name": "losses"},
        {"name": "gradients", "reductions": ["abs_mean"]}]})"),
              testing::hookOptions(trial.path()));
    for (int s = 0; s < 2; ++s) {
      hook.beginStep(s == 0 ? Mode::kTrain : Mode::kEval);
      const float w[6] = {1.5f, -2, 3, 4, 5, 6.25f + s};
      hook.saveTensor("Net_fc1.weight", DType::kFloat32, {2, 3}, w);
      const int64_t ids[2] = {-7, 1LL << 40};
      hook.saveTensor("Net_emb.weight", DType::kInt64, {2}, ids);
      const uint16_t half[2] = {0x3C00, 0xC000};  // 1.0, -2.0
      hook.saveTensor("Net_h.weight", DType::kFloat16, {2}, half);
      const float g[2] = {-1.0f, 3.0f};
      hook.saveTensor(gradientTensorName("Net", "fc1.weight"), DType::kFloat32, {2}, g);
      const double loss = 0.5 * (s + 1);
      hook.saveTensor(lossTensorName("CrossEntropyLoss"), DType::kFloat64, {}, &loss);
      hook.saveScalar("accuracy", 0.25 + s);
    }
    hook.close(true);
  }
  const nlohmann::json j = decoded(trial, work);
  if (j.is_null()) GTEST_SKIP() << "decode_events.py found its environment incomplete";
  EXPECT_EQ(j["collections_keys"], nlohmann::json::array({"_meta", "collections"}));
  const auto& t = j["tensors"];
  EXPECT_EQ(t["Net_fc1.weight"]["0"]["shape"], nlohmann::json::array({2, 3}));
  EXPECT_EQ(t["Net_fc1.weight"]["0"]["values"],
            nlohmann::json::array({1.5, -2.0, 3.0, 4.0, 5.0, 6.25}));
  EXPECT_EQ(t["Net_fc1.weight"]["1"]["values"][5], 7.25);
  EXPECT_EQ(t["Net_fc1.weight"]["1"]["mode"], "EVAL");
  EXPECT_EQ(t["Net_fc1.weight"]["1"]["mode_step"], 0);
  EXPECT_EQ(t["Net_emb.weight"]["0"]["dtype"], 9);  // DT_INT64
  EXPECT_EQ(t["Net_emb.weight"]["0"]["values"], nlohmann::json::array({-7.0, 1099511627776.0}));
  EXPECT_EQ(t["Net_h.weight"]["0"]["dtype"], 19);  // DT_HALF
  EXPECT_EQ(t["Net_h.weight"]["0"]["values"], nlohmann::json::array({1.0, -2.0}));
  EXPECT_EQ(t["CrossEntropyLoss_output_0"]["1"]["shape"], nlohmann::json::array());
  EXPECT_EQ(t["CrossEntropyLoss_output_0"]["1"]["values"], nlohmann::json::array({1.0}));
  EXPECT_EQ(t["smdebug/reductions/abs_mean/gradient/Net_fc1.weight"]["0"]["values"],
            nlohmann::json::array({2.0}));
  EXPECT_FALSE(t.contains("gradient/Net_fc1.weight"));  // reductions only; none in EVAL
  EXPECT_EQ(t["scalar/accuracy"]["1"]["values"], nlohmann::json::array({1.25}));
  const auto& tb = j["tensorboard"];
  EXPECT_EQ(tb["accuracy"], nlohmann::json::parse("[[0, 0.25], [1, 1.25]]"));
  EXPECT_EQ(tb["CrossEntropyLoss_output_0"], nlohmann::json::parse("[[0, 0.5], [1, 1.0]]"));
  EXPECT_TRUE(j["histograms"].empty());  // no collection asked for them
}

// save_shape and save_histogram: shape-only index entries (a step without an event file)
// and TensorBoard histograms, read by the independent decoder with protoc-compiled classes.
TEST(WireCompat, PythonProtobufReadsShapesAndHistograms) {
  const std::string missing = testing::pythonDecoderMissing();
  if (!missing.empty()) GTEST_SKIP() << missing;
  TempDir trial, work;
  {
    Hook hook(debuggerConfig(R"({"save_interval": 1, "collections": [
        {"name": "weights", "save_histogram": true},
        {"name": "outputs", "save_shape": true, "save_raw_tensor": false}]})"),
              testing::hookOptions(trial.path()));
    const float w[4] = {-1.0f, 0.5f, 2.0f, 2.0f};
    hook.beginStep(Mode::kTrain);
    hook.saveTensor("Net_fc1.weight", DType::kFloat32, {2, 2}, w);
    hook.saveTensor("fc1_output_0", DType::kFloat32, {1, 4}, w);
    hook.beginStep(Mode::kPredict);  // shapes only: no event file at this step
    hook.saveTensor("fc1_output_0", DType::kFloat32, {4, 1}, w);
    hook.close(true);
  }
  const nlohmann::json j = decoded(trial, work);
  if (j.is_null()) GTEST_SKIP() << "decode_events.py found its environment incomplete";
  EXPECT_EQ(j["shapes"]["fc1_output_0"], nlohmann::json::parse(R"({"0": [1, 4], "1": [4, 1]})"));
  EXPECT_FALSE(j["tensors"].contains("fc1_output_0"));
  // step, num, min, max, sum, values counted in buckets
  EXPECT_EQ(j["histograms"]["weights/Net_fc1.weight"], nlohmann::json::parse("[[0, 4.0, -1.0, 2.0, 3.5, 4.0]]"));
}

}  // namespace
}  // namespace strata::debugger
