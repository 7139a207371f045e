// Pure pieces: dtypes, names and paths, the JSON files, the event codec.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "debugger/event_codec.h"
#include "debugger/naming.h"
#include "debugger/trial_files.h"
#include "debugger/types.h"
#include "debugger_testing.h"

namespace strata::debugger {
namespace {

TEST(Types, HalfAndBfloat16Conversions) {
  EXPECT_EQ(halfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(halfToFloat(0xC000), -2.0f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(halfToFloat(0x7BFF), 65504.0f);
  EXPECT_TRUE(std::isinf(halfToFloat(0x7C00)));
  EXPECT_TRUE(std::isnan(halfToFloat(0x7E00)));
  for (float v : {0.0f, 1.0f, -0.5f, 3.140625f, 65504.0f, 6.1035156e-05f})
    EXPECT_EQ(halfToFloat(floatToHalf(v)), v) << v;
  EXPECT_EQ(bfloat16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(bfloat16ToFloat(0xC040), -3.0f);
}

TEST(Types, StoredTypesAreThoseSmdebugReads) {
  EXPECT_EQ(storedDType(DType::kBFloat16), DType::kFloat32);
  EXPECT_EQ(storedDType(DType::kInt8), DType::kInt32);
  EXPECT_EQ(storedDType(DType::kInt16), DType::kInt32);
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt32, DType::kInt64,
                  DType::kUInt8, DType::kBool})
    EXPECT_EQ(storedDType(d), d) << dtypeName(d);

  const uint16_t bf16[3] = {0x3F80, 0xC040, 0x0000};
  const std::string f32 = toStoredBytes(DType::kBFloat16, bf16, 3);
  ASSERT_EQ(f32.size(), 12u);
  float out[3];
  std::memcpy(out, f32.data(), 12);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -3.0f);
  EXPECT_EQ(out[2], 0.0f);

  const int8_t i8[2] = {-128, 127};
  const std::string i32 = toStoredBytes(DType::kInt8, i8, 2);
  int32_t wide[2];
  std::memcpy(wide, i32.data(), 8);
  EXPECT_EQ(wide[0], -128);
  EXPECT_EQ(wide[1], 127);
}

TEST(Naming, FollowsSmdebugPytorchHook) {
  EXPECT_EQ(moduleClassName("torch::nn::Sequential"), "Sequential");
  EXPECT_EQ(moduleClassName("NetImpl"), "Net");
  EXPECT_EQ(moduleClassName("my::ns::ResNetImpl"), "ResNet");
  EXPECT_EQ(moduleClassName("Impl"), "Impl");
  EXPECT_EQ(parameterTensorName("Net", "fc1.weight"), "Net_fc1.weight");
  EXPECT_EQ(gradientTensorName("Net", "fc1.weight"), "gradient/Net_fc1.weight");
  EXPECT_EQ(moduleOutputTensorName("layer1.0.relu", 0), "layer1.0.relu_output_0");
  EXPECT_EQ(moduleInputTensorName("fc1", 1), "fc1_input_1");
  EXPECT_EQ(lossTensorName("CrossEntropyLoss"), "CrossEntropyLoss_output_0");
  EXPECT_EQ(scalarTensorName("val_acc"), "scalar/val_acc");
  EXPECT_EQ(reductionTensorName("dense/bias:0", {ReductionOp::kL2, true}),
            "smdebug/reductions/abs_l2/dense/bias");
  std::string base;
  Reduction r;
  ASSERT_TRUE(parseReductionTensorName("smdebug/reductions/abs_mean/gradient/Net_fc1.weight", &base, &r));
  EXPECT_EQ(base, "gradient/Net_fc1.weight");
  EXPECT_TRUE(r.abs);
  EXPECT_EQ(r.op, ReductionOp::kMean);
  EXPECT_FALSE(parseReductionTensorName("Net_fc1.weight", &base, &r));
  EXPECT_FALSE(parseReductionTensorName("smdebug/reductions/median/x", &base, &r));
}

TEST(Naming, PathsArePaddedAndRelative) {
  EXPECT_EQ(eventFileRelPath(7, "worker_0"), "events/000000000007/000000000007_worker_0.tfevents");
  EXPECT_EQ(indexFileRelPath(7, "worker_0"), "index/000000000/000000000007_worker_0.json");
  EXPECT_EQ(indexFileRelPath(12345, "worker_1"), "index/000000012/000000012345_worker_1.json");
  EXPECT_EQ(collectionsFileRelPath("worker_3"), "collections/000000000/worker_3_collections.json");
  int64_t step = 0;
  std::string worker;
  ASSERT_TRUE(parseStepFileName("000000012345_worker_1.json", &step, &worker));
  EXPECT_EQ(step, 12345);
  EXPECT_EQ(worker, "worker_1");
  EXPECT_FALSE(parseStepFileName("000000012345_worker_1.json.tmp", &step, &worker));
  EXPECT_TRUE(isValidWorkerName("worker_10"));
  EXPECT_FALSE(isValidWorkerName("job__worker"));
  EXPECT_FALSE(isValidWorkerName("a/b"));
  EXPECT_FALSE(isValidWorkerName(""));
  ASSERT_TRUE(parseCollectionsFileName("worker_0_collections.json", &worker));
  EXPECT_EQ(worker, "worker_0");
}

TEST(TrialFiles, IndexJsonHasSmdebugShape) {
  IndexFile index;
  index.mode = Mode::kEval;
  index.modeStep = 3;
  index.eventFileName = eventFileRelPath(7, "worker_0");
  index.tensors.push_back({"gradient/Net_fc1.weight", 0, 812});
  EXPECT_EQ(indexFileJson(index),
            R"({"meta":{"mode":"EVAL","mode_step":3,"event_file_name":"events/000000000007/000000000007_worker_0.tfevents"},)"
            R"("tensor_payload":[{"tensorname":"gradient/Net_fc1.weight","start_idx":0,"length":812}],"shape_payload":[]})");
  IndexFile back;
  std::string error;
  ASSERT_TRUE(parseIndexFile(indexFileJson(index), &back, &error)) << error;
  EXPECT_EQ(back.mode, Mode::kEval);
  EXPECT_EQ(back.modeStep, 3);
  ASSERT_EQ(back.tensors.size(), 1u);
  EXPECT_EQ(back.tensors[0].length, 812u);
  EXPECT_FALSE(parseIndexFile(R"({"meta": {}, "tensor_payload": []})", &back, &error));
  EXPECT_FALSE(parseIndexFile(R"({"meta": {"mode": "TRAIN", "mode_step": 1}})", &back, &error));
  EXPECT_FALSE(parseIndexFile(R"({"meta": {"mode": "TRAINING", "mode_step": 1}, "tensor_payload": []})", &back, &error));
  EXPECT_FALSE(parseIndexFile("{\"meta\": {\"mo", &back, &error));
}

TEST(TrialFiles, CollectionsJsonHasOnlyCollectionsAndMeta) {
  const auto cfg = testing::debuggerConfig(
      R"({"collections": [{"name": "gradients", "save_interval": 100, "reductions": ["abs_mean", "l2"]},
                          {"name": "losses", "save_interval": 10}]})");
  const auto cs = effectiveCollections(cfg);
  const auto j = nlohmann::json::parse(collectionsFileJson(cs, 2));
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j["_meta"]["num_workers"], 2);
  const auto& g = j["collections"]["gradients"];
  EXPECT_EQ(g["include_regex"], nlohmann::json::array({"^gradient"}));
  EXPECT_EQ(g["reduction_config"]["reductions"], "abs_mean,l2_norm");
  EXPECT_EQ(g["reduction_config"]["save_raw_tensor"], false);
  for (const char* mode : {"TRAIN", "EVAL", "PREDICT", "GLOBAL"}) {
    EXPECT_EQ(g["save_config"][mode]["save_interval"], 100) << mode;
    EXPECT_TRUE(g["save_config"][mode]["end_step"].is_null()) << mode;
  }
  EXPECT_EQ(j["collections"]["losses"]["include_regex"],
            nlohmann::json::array({"[Ll]oss_(?!input).*output"}));
  CollectionsFile parsed;
  std::string error;
  ASSERT_TRUE(parseCollectionsFile(j.dump(), &parsed, &error)) << error;
  EXPECT_EQ(parsed.numWorkers, 2);
  EXPECT_EQ(parsed.collections.size(), 2u);
}

TEST(EventCodec, RoundTripsEveryStoredType) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt32,
                      DType::kInt64, DType::kUInt8, DType::kBool}) {
    TensorData t;
    t.dtype = dtype;
    t.shape = {2, 3};
    t.bytes.assign(6 * dtypeBytes(dtype), '\0');
    for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = static_cast<char>(i % 2);
    const std::string expected = t.bytes;
    TensorEventInfo info{"x", 11, Mode::kPredict, 4, 123.0};
    DecodedTensorEvent back;
    std::string error;
    ASSERT_TRUE(decodeTensorEvent(encodeTensorEvent(info, std::move(t)), &back, &error)) << error;
    EXPECT_EQ(back.tensor.dtype, dtype);
    EXPECT_EQ(back.tensor.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(back.tensor.bytes, expected) << dtypeName(dtype);
    EXPECT_EQ(back.info.mode, Mode::kPredict);
    EXPECT_EQ(back.info.modeStep, 4);
    EXPECT_EQ(back.info.globalStep, 11);
  }
}

TEST(EventCodec, RejectsInconsistentPayloads) {
  DecodedTensorEvent back;
  std::string error;
  EXPECT_FALSE(decodeTensorEvent("\xff\xff\xff", &back, &error));
  TensorData t;
  t.dtype = DType::kFloat32;
  t.shape = {4};
  t.bytes.assign(8, '\0');  // two floats for four elements
  EXPECT_FALSE(decodeTensorEvent(encodeTensorEvent({"x", 0, Mode::kTrain, 0, 0}, std::move(t)), &back, &error));
  EXPECT_NE(error.find("bytes"), std::string::npos) << error;
}

}  // namespace
}  // namespace strata::debugger
