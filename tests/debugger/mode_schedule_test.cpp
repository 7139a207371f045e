// Per-mode save configs (smdebug's SaveConfig with mode_save_configs: TRAIN, EVAL, PREDICT,
// GLOBAL) and save_shape: how the levels combine, what the collections file says, and the
// index files the hook writes for a shape-only collection.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "debugger/collections.h"
#include "debugger/file_util.h"
#include "debugger/hook.h"
#include "debugger/naming.h"
#include "debugger/trial_files.h"
#include "debugger_testing.h"
#include "strata/errors.h"

namespace strata::debugger {
namespace {

using testing::debuggerConfig;
using testing::dueSteps;
using testing::TempDir;

// Section keys, then section save_config.<MODE>, then collection keys, then collection
// save_config.<MODE>: each level overrides the previous one key by key.
const char* kLevels = R"({"save_interval": 10, "save_config": {"EVAL": {"save_interval": 3}},
  "collections": [
    {"name": "weights", "start_step": 2,
     "save_config": {"TRAIN": {"save_steps": [1]}, "PREDICT": {"save_interval": 1, "end_step": 4}}},
    {"name": "losses"},
    {"name": "biases", "save_interval": 5}]})";

TEST(ModeSchedule, LevelsOverrideKeyByKey) {
  const auto cs = effectiveCollections(debuggerConfig(kLevels));
  // weights: interval 10 from the section, start 2 from the collection, save_steps for TRAIN.
  EXPECT_EQ(dueSteps(cs[0], Mode::kTrain, 25), (std::vector<int64_t>{1, 10, 20}));
  // EVAL: the section's EVAL interval 3, the collection's start 2.
  EXPECT_EQ(dueSteps(cs[0], Mode::kEval, 10), (std::vector<int64_t>{3, 6, 9}));
  EXPECT_EQ(dueSteps(cs[0], Mode::kPredict, 10), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(dueSteps(cs[0], Mode::kGlobal, 25), (std::vector<int64_t>{10, 20}));
  // losses: only the section's levels.
  EXPECT_EQ(dueSteps(cs[1], Mode::kTrain, 20), (std::vector<int64_t>{0, 10, 20}));
  EXPECT_EQ(dueSteps(cs[1], Mode::kEval, 7), (std::vector<int64_t>{0, 3, 6}));
  // biases: its own interval overrides the section's EVAL interval too (a later level).
  EXPECT_EQ(dueSteps(cs[2], Mode::kEval, 10), (std::vector<int64_t>{0, 5, 10}));
  EXPECT_EQ(dueSteps(cs[2], Mode::kPredict, 10), (std::vector<int64_t>{0, 5, 10}));
}

TEST(ModeSchedule, HookUsesTheScheduleOfTheStepsMode) {
  TempDir dir;
  Hook hook(debuggerConfig(R"({"collections": [{"name": "weights", "save_interval": 100,
              "save_config": {"EVAL": {"save_interval": 2}, "PREDICT": {"save_steps": [1], "start_step": 1}}}]})"),
            testing::hookOptions(dir.path()));
  std::vector<std::pair<Mode, bool>> seen;
  for (Mode m : {Mode::kTrain, Mode::kTrain, Mode::kEval, Mode::kEval, Mode::kEval, Mode::kPredict,
                 Mode::kPredict, Mode::kTrain})
    seen.emplace_back(m, hook.beginStep(m));
  const std::vector<std::pair<Mode, bool>> expected = {
      {Mode::kTrain, true},  {Mode::kTrain, false},   {Mode::kEval, true},     {Mode::kEval, false},
      {Mode::kEval, true},   {Mode::kPredict, false}, {Mode::kPredict, true},  {Mode::kTrain, false}};
  EXPECT_EQ(seen, expected);
}

TEST(ModeSchedule, BadModeKeysAndRangesAreConfigErrors) {
  try {
    debuggerConfig(R"({"collections": [{"name": "weights", "save_config": {"TRAINING": {"save_interval": 2}}}]})");
    FAIL() << "no error for an unknown mode";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/debugger/collections/0/save_config"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("TRAIN"), std::string::npos) << e.what();
  }
  try {
    debuggerConfig(R"({"start_step": 5, "collections": [{"name": "weights",
                     "save_config": {"EVAL": {"end_step": 3}}}]})");
    FAIL() << "no error for an empty EVAL range";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("end_step 3 must be greater than start_step 5"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(debuggerConfig(R"({"collections": [{"name": "weights", "save_config": {"EVAL": {"save_interval": 0}}}]})"),
               ConfigError);
  EXPECT_THROW(debuggerConfig(R"({"collections": [{"name": "weights", "save_shape": "yes"}]})"), ConfigError);
}

TEST(ModeSchedule, EffectiveConfigRoundTrips) {
  const config::JobConfig first = config::parseJobConfig(std::string("{\"debugger\": ") + kLevels + "}", "a");
  const nlohmann::json j = config::toJson(first);
  EXPECT_EQ(j["debugger"]["collections"][0]["save_config"]["PREDICT"]["end_step"], 4);
  EXPECT_EQ(config::toJson(config::parseJobConfig(j.dump(), "b")), j);
}

TEST(ModeSchedule, CollectionsFileCarriesEachModeShapeAndHistogram) {
  auto cfg = debuggerConfig(R"({"collections": [{"name": "weights", "save_shape": true, "save_histogram": true,
                                  "save_config": {"EVAL": {"save_interval": 7}}},
                                 {"name": "losses", "save_histogram": true}]})");
  const auto j = nlohmann::json::parse(collectionsFileJson(effectiveCollections(cfg), 1));
  const auto& w = j["collections"]["weights"];
  EXPECT_EQ(w["save_config"]["TRAIN"]["save_interval"], 500);
  EXPECT_EQ(w["save_config"]["EVAL"]["save_interval"], 7);
  EXPECT_EQ(w["save_config"]["PREDICT"]["save_interval"], 500);
  EXPECT_EQ(w["reduction_config"]["save_shape"], true);
  EXPECT_EQ(w["save_histogram"], true);
  EXPECT_EQ(j["collections"]["losses"]["save_histogram"], false);  // never for scalar collections
}

IndexFile readIndex(const std::string& trialDir, int64_t step) {
  std::string text, error;
  EXPECT_TRUE(readWholeFile(trialDir + "/" + indexFileRelPath(step, "worker_0"), &text, &error)) << error;
  IndexFile index;
  EXPECT_TRUE(parseIndexFile(text, &index, &error)) << error;
  return index;
}

TEST(SaveShape, ShapeOnlyCollectionsFillTheShapePayload) {
  TempDir dir;
  {
    Hook hook(debuggerConfig(R"({"save_interval": 1, "collections": [
                 {"name": "acts", "include_regex": "_output_0$", "save_shape": true, "save_raw_tensor": false,
                  "reductions": ["max"]},
                 {"name": "shapes", "include_regex": "^relu", "save_shape": true, "save_raw_tensor": false,
                  "reductions": []},
                 {"name": "weights", "save_config": {"TRAIN": {"start_step": 1}}}]})"),
              testing::hookOptions(dir.path()));
    const float x[6] = {1, 2, 3, 4, 5, 6};
    for (int step = 0; step < 2; ++step) {
      hook.beginStep(Mode::kTrain);
      hook.saveTensor("relu_output_0", DType::kFloat32, {2, 3}, x);
      hook.saveTensor("fc_output_0", DType::kFloat32, {3, 2}, x);
      hook.saveTensor("Net_fc.weight", DType::kFloat32, {6}, x);
    }
    hook.close(true);
    EXPECT_EQ(hook.firstError(), "");
  }
  // Step 0: shapes of both outputs, fc's max; no raw tensor, no step marker.
  const IndexFile s0 = readIndex(dir.path(), 0);
  ASSERT_EQ(s0.shapes.size(), 2u);
  EXPECT_EQ(s0.shapes[0].tensorName, "relu_output_0");
  EXPECT_EQ(s0.shapes[0].originalName, "relu_output_0");
  EXPECT_EQ(s0.shapes[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(s0.shapes[1].shape, (std::vector<int64_t>{3, 2}));
  std::vector<std::string> tensors;
  for (const auto& t : s0.tensors) tensors.push_back(t.tensorName);
  EXPECT_EQ(tensors, (std::vector<std::string>{"smdebug/reductions/max/relu_output_0",
                                               "smdebug/reductions/max/fc_output_0"}));
  // Step 1: weights are raw, so only in tensor_payload (never in both payloads).
  const IndexFile s1 = readIndex(dir.path(), 1);
  for (const auto& s : s1.shapes) EXPECT_NE(s.tensorName, "Net_fc.weight");
  bool weightRaw = false;
  for (const auto& t : s1.tensors) weightRaw = weightRaw || t.tensorName == "Net_fc.weight";
  EXPECT_TRUE(weightRaw);
}

TEST(SaveShape, AStepWithOnlyShapesHasAnIndexButNoEventFile) {
  TempDir dir;
  {
    Hook hook(debuggerConfig(R"({"save_interval": 1, "collections": [
                 {"name": "outputs", "save_shape": true, "save_raw_tensor": false, "reductions": []}]})"),
              testing::hookOptions(dir.path()));
    const float x[2] = {1, 2};
    hook.beginStep(Mode::kEval);
    hook.saveTensor("fc_output_0", DType::kFloat32, {1, 2}, x);
    hook.close(true);
  }
  const IndexFile s0 = readIndex(dir.path(), 0);
  EXPECT_EQ(s0.mode, Mode::kEval);
  EXPECT_TRUE(s0.tensors.empty());
  ASSERT_EQ(s0.shapes.size(), 1u);
  EXPECT_EQ(s0.shapes[0].shape, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(listFilesRecursive(dir.path() + "/events").empty());
  // smdebug's reader requires meta and one of the payloads: the raw JSON has both keys.
  std::string text, error;
  ASSERT_TRUE(readWholeFile(dir.path() + "/" + indexFileRelPath(0, "worker_0"), &text, &error));
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["shape_payload"][0]["shape"], nlohmann::json::array({1, 2}));
  EXPECT_EQ(j["meta"]["event_file_name"], "events/000000000000/000000000000_worker_0.tfevents");
}

}  // namespace
}  // namespace strata::debugger
