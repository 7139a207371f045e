// Files as smdebug itself writes them, built here byte by byte from the spec (independent of
// our encoder: a hand-written protobuf encoder, Python json.dumps formatting), read back
// with the Trial API. Also: corrupt and truncated input is reported, never a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "debugger/crc32c.h"
#include "debugger/file_util.h"
#include "debugger/trial.h"
#include "debugger_testing.h"

namespace strata::debugger {
namespace {

using testing::TempDir;

// --- a minimal protobuf wire encoder -------------------------------------------------------
std::string varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
  return out;
}
std::string key(int field, int wire) { return varint(static_cast<uint64_t>(field) << 3 | wire); }
std::string ld(int field, const std::string& payload) {
  return key(field, 2) + varint(payload.size()) + payload;
}
std::string vint(int field, uint64_t v) { return key(field, 0) + varint(v); }
template <typename T>
std::string raw(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(v));
}

// smdebug's make_tensor_proto + write_tensor: tag, plugin data, dims named "<tag>_<size>".
std::string smdebugEvent(const std::string& tag, int64_t step, int mode, int64_t modeStep,
                         int dtype, const std::vector<int64_t>& shape, const std::string& content,
                         const std::string& floatVal = "") {
  std::string dims;
  for (int64_t d : shape) dims += ld(2, vint(1, d) + ld(2, tag + "_" + std::to_string(d)));
  std::string tensor = vint(1, dtype) + ld(2, dims);
  if (!content.empty()) tensor += ld(4, content);
  if (!floatVal.empty()) tensor += ld(5, floatVal);  // packed float_val
  const std::string meta = ld(1, ld(1, "mode_step") + ld(2, std::to_string(modeStep))) +
                           ld(1, ld(1, "mode") + ld(2, std::to_string(mode)));
  const std::string value = ld(1, tag) + ld(8, tensor) + ld(9, meta);
  return key(1, 1) + raw(1700000000.25) + vint(2, step) + ld(5, ld(1, value));
}

std::string smdebugRecord(const std::string& payload) {
  const uint64_t len = payload.size();
  const std::string header = raw(len);
  return header + raw(maskCrc(crc32c(header))) + payload + raw(uint32_t{0x062DC0B3});
}

void writeText(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// Writes one event file and its index in smdebug's layout; returns the event file path.
std::string writeStep(const std::string& dir, int64_t step, const std::string& worker,
                      const char* modeName, int64_t modeStep,
                      const std::vector<std::pair<std::string, std::string>>& namedPayloads,
                      const std::string& shapePayload = "[]") {
  char s12[16], s9[16];
  std::snprintf(s12, sizeof(s12), "%012lld", static_cast<long long>(step));
  std::snprintf(s9, sizeof(s9), "%09lld", static_cast<long long>(step / 1000));
  const std::string rel = std::string("events/") + s12 + "/" + s12 + "_" + worker + ".tfevents";
  std::string file, payload;
  for (const auto& [name, event] : namedPayloads) {
    const std::string rec = smdebugRecord(event);
    if (!payload.empty()) payload += ", ";
    payload += "{\"tensorname\": \"" + name + "\", \"start_idx\": " + std::to_string(file.size()) +
               ", \"length\": " + std::to_string(rec.size()) + "}";
    file += rec;
  }
  writeText(dir + "/" + rel, file);
  writeText(dir + "/index/" + s9 + "/" + s12 + "_" + worker + ".json",
            std::string("{\"meta\": {\"mode\": \"") + modeName + "\", \"mode_step\": " +
                std::to_string(modeStep) + ", \"event_file_name\": \"" + rel +
                "\"}, \"tensor_payload\": [" + payload + "], \"shape_payload\": " + shapePayload + "}");
  return dir + "/" + rel;
}

// smdebug's collections export for a PyTorch hook with include_workers="one".
const char* kSmdebugCollections =
    R"({"collections": {"all": {"name": "all", "include_regex": [], "tensor_names": [], )"
    R"("reduction_config": {"save_raw_tensor": true, "reductions": ""}, "save_config": )"
    R"({"TRAIN": {"save_interval": 1, "save_steps": [], "start_step": 0, "end_step": null}, )"
    R"("EVAL": {"save_interval": 1, "save_steps": [], "start_step": 0, "end_step": null}, )"
    R"("PREDICT": {"save_interval": 1, "save_steps": [], "start_step": 0, "end_step": null}, )"
    R"("GLOBAL": {"save_interval": 1, "save_steps": [], "start_step": 0, "end_step": null}}, )"
    R"("save_histogram": true}, "weights": {"name": "weights", "include_regex": ["^(?!gradient).*weight"], )"
    R"("tensor_names": ["Net_fc1.weight"], "reduction_config": {"save_raw_tensor": true, "reductions": ""}, )"
    R"("save_config": null, "save_histogram": true}, "gradients": {"name": "gradients", )"
    R"("include_regex": ["^gradient"], "tensor_names": [], "reduction_config": {"save_raw_tensor": false, )"
    R"("reductions": "abs_mean"}, "save_config": null, "save_histogram": true}, "losses": {"name": "losses", )"
    R"("include_regex": ["[Ll]oss_(?!input).*output"], "tensor_names": [], "reduction_config": null, )"
    R"("save_config": null, "save_histogram": false}}, "_meta": {"num_workers": 1}})";

TEST(SmdebugFiles, ReadsATrialWrittenBySmdebug) {
  TempDir dir;
  writeText(dir.path() + "/collections/000000000/worker_0_collections.json", kSmdebugCollections);
  const float w[4] = {0.5f, -1.0f, 1.5f, 2.0f};
  const float loss[1] = {2.25f};
  const float absMean = 0.125f;
  writeStep(dir.path(), 0, "worker_0", "TRAIN", 0,
            {{"Net_fc1.weight", smdebugEvent("Net_fc1.weight", 0, 1, 0, /*DT_FLOAT*/ 1, {2, 2},
                                             std::string(reinterpret_cast<const char*>(w), 16))},
             {"smdebug/reductions/abs_mean/gradient/Net_fc1.weight",
              smdebugEvent("smdebug/reductions/abs_mean/gradient/Net_fc1.weight", 0, 1, 0, 1, {},
                           raw(absMean))},
             {"CrossEntropyLoss_output_0",
              smdebugEvent("CrossEntropyLoss_output_0", 0, 1, 0, 1, {1}, raw(loss))}},
            R"([{"tensorname": "Net_fc1.bias", "originalname": "Net_fc1.bias", "shape": [2]}])");
  const double evalLoss = 3.5;
  writeStep(dir.path(), 1, "worker_0", "EVAL", 0,
            {{"CrossEntropyLoss_output_0",
              smdebugEvent("CrossEntropyLoss_output_0", 1, 2, 0, /*DT_DOUBLE*/ 2, {1}, raw(evalLoss))},
             // TensorFlow-style typed fallback instead of tensor_content.
             {"scalar/acc", smdebugEvent("scalar/acc", 1, 2, 0, 1, {1}, "", raw(0.75f))}});
  writeText(dir.path() + "/training_job_end.ts", "");

  Trial trial(dir.path());
  EXPECT_TRUE(trial.problems().empty()) << trial.problems().front();
  EXPECT_EQ(trial.workers(), (std::vector<std::string>{"worker_0"}));
  EXPECT_EQ(trial.numWorkers(), 1);
  EXPECT_EQ(trial.tensorNames(), (std::vector<std::string>{"CrossEntropyLoss_output_0",
                                                           "Net_fc1.weight",
                                                           "gradient/Net_fc1.weight",
                                                           "scalar/acc"}));
  EXPECT_EQ(trial.tensorNames("weights"), (std::vector<std::string>{"Net_fc1.weight"}));
  EXPECT_EQ(trial.tensorNames("losses"), (std::vector<std::string>{"CrossEntropyLoss_output_0"}));
  EXPECT_EQ(trial.tensorNames("all"), (std::vector<std::string>{}));  // no regex, no names
  EXPECT_EQ(trial.steps(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(trial.steps(Mode::kEval), (std::vector<int64_t>{0}));
  const TensorData weight = trial.tensor("Net_fc1.weight").value(0);
  EXPECT_EQ(weight.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(weight.toDoubles(), (std::vector<double>{0.5, -1.0, 1.5, 2.0}));
  EXPECT_DOUBLE_EQ(trial.tensor("gradient/Net_fc1.weight").reductionValue(0, ReductionOp::kMean, true),
                   0.125);
  EXPECT_THROW(trial.tensor("gradient/Net_fc1.weight").value(0), TensorUnavailable);
  EXPECT_DOUBLE_EQ(trial.tensor("CrossEntropyLoss_output_0").value(0, "", Mode::kEval).scalar(), 3.5);
  EXPECT_DOUBLE_EQ(trial.tensor("scalar/acc").value(1).scalar(), 0.75);
  EXPECT_THROW(trial.tensor("Net_fc1.bias"), TensorUnavailable);  // shape-only entry
}

TEST(SmdebugFiles, CorruptInputIsReportedWithPathAndOffset) {
  TempDir dir;
  writeText(dir.path() + "/collections/000000000/worker_0_collections.json", kSmdebugCollections);
  const float a = 1.0f, b = 2.0f;
  const std::string events = writeStep(
      dir.path(), 0, "worker_0", "TRAIN", 0,
      {{"Net_a.weight", smdebugEvent("Net_a.weight", 0, 1, 0, 1, {}, raw(a))},
       {"Net_b.weight", smdebugEvent("Net_b.weight", 0, 1, 0, 1, {}, raw(b))}});
  writeStep(dir.path(), 1, "worker_0", "TRAIN", 1,
            {{"Net_a.weight", smdebugEvent("Net_a.weight", 1, 1, 1, 1, {}, raw(a))}});
  writeText(dir.path() + "/index/000000000/000000000002_worker_0.json", "{\"meta\": {\"mo");
  writeText(dir.path() + "/index/000000000/000000000003_worker_0.json",
            R"({"meta": {"mode": "TRAIN", "mode_step": 3, "event_file_name": "events/000000000003/000000000003_worker_0.tfevents"},
                "tensor_payload": [{"tensorname": "Net_a.weight", "start_idx": 0, "length": 60}]})");
  // Truncate the first event file in the middle of its second record.
  std::string bytes, error;
  ASSERT_TRUE(readWholeFile(events, &bytes, &error));
  const size_t firstRecord = bytes.size() / 2;
  writeText(events, bytes.substr(0, bytes.size() - 6));
  // Corrupt the second step's payload (its footer no longer matches anything).
  std::string step1;
  const std::string step1Path = dir.path() + "/events/000000000001/000000000001_worker_0.tfevents";
  ASSERT_TRUE(readWholeFile(step1Path, &step1, &error));
  step1[step1.size() - 2] ^= 0x40;
  writeText(step1Path, step1);

  Trial trial(dir.path());
  ASSERT_EQ(trial.problems().size(), 1u);
  EXPECT_NE(trial.problems()[0].find("000000000002_worker_0.json"), std::string::npos)
      << trial.problems()[0];
  EXPECT_EQ(trial.tensor("Net_a.weight").value(0).scalar(), 1.0);  // the intact record
  try {
    trial.tensor("Net_b.weight").value(0);
    ADD_FAILURE() << "expected an error for the truncated record";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(events), std::string::npos) << what;
    EXPECT_NE(what.find("offset " + std::to_string(firstRecord)), std::string::npos) << what;
  }
  EXPECT_THROW(trial.tensor("Net_a.weight").value(1), Error);   // bad footer
  EXPECT_THROW(trial.tensor("Net_a.weight").value(3), Error);   // missing event file
  EXPECT_THROW(trial.tensor("Net_a.weight").value(2), TensorUnavailable);  // skipped index
}

}  // namespace
}  // namespace strata::debugger
