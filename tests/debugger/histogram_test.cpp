// TensorBoard histograms (smdebug's save_histogram): buckets and the event record against a
// golden file computed with numpy and a hand-written protobuf encoder
// (fixtures/make_histogram_golden.py), and the hook writing them only for the collections
// that ask, under smdebug's tag "<collection>/<tensor>".
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "debugger/event_codec.h"
#include "debugger/file_util.h"
#include "debugger/histogram.h"
#include "debugger/hook.h"
#include "debugger/proto/tensorboard_event.pb.h"
#include "debugger/record.h"
#include "debugger_testing.h"

namespace strata::debugger {
namespace {

using testing::debuggerConfig;
using testing::TempDir;

nlohmann::json goldenCases() {
  std::string text, error;
  const std::string path = std::string(STRATA_SOURCE_DIR) + "/tests/debugger/fixtures/histogram_golden.json";
  EXPECT_TRUE(readWholeFile(path, &text, &error)) << error;
  return nlohmann::json::parse(text)["cases"];
}

TEST(Histogram, BucketsMatchNumpyOverTensorflowDefaultEdges) {
  const nlohmann::json cases = goldenCases();
  ASSERT_EQ(cases.size(), 3u);
  for (const auto& c : cases) {
    const auto h = makeHistogram(c["values"].get<std::vector<double>>());
    ASSERT_TRUE(h.has_value()) << c["tag"];
    const auto& e = c["histogram"];
    EXPECT_EQ(h->min, e["min"].get<double>()) << c["tag"];
    EXPECT_EQ(h->max, e["max"].get<double>()) << c["tag"];
    EXPECT_EQ(h->num, e["num"].get<double>()) << c["tag"];
    EXPECT_EQ(h->sum, e["sum"].get<double>()) << c["tag"];
    EXPECT_EQ(h->sumSquares, e["sum_squares"].get<double>()) << c["tag"];
    EXPECT_EQ(h->bucketLimit, e["bucket_limit"].get<std::vector<double>>()) << c["tag"];  // bit-exact edges
    EXPECT_EQ(h->bucket, e["bucket"].get<std::vector<double>>()) << c["tag"];
  }
}

TEST(Histogram, EventRecordMatchesGoldenBytes) {
  for (const auto& c : goldenCases()) {
    const auto h = makeHistogram(c["values"].get<std::vector<double>>());
    ASSERT_TRUE(h.has_value());
    std::string record;
    appendRecord(record,
                 encodeTensorboardHistogram(c["tag"].get<std::string>(), *h, c["step"].get<int64_t>(),
                                            c["wall_time"].get<double>()),
                 Footer::kPayloadCrc);
    EXPECT_EQ(testing::hexOf(record), c["record_hex"].get<std::string>()) << c["tag"];
  }
}

TEST(Histogram, DefaultEdgesAreSymmetricAroundZero) {
  const auto& edges = defaultHistogramEdges();
  ASSERT_EQ(edges.size() % 2, 1u);
  const size_t mid = edges.size() / 2;
  EXPECT_EQ(edges[mid], 0.0);
  EXPECT_EQ(edges[mid + 1], 1e-12);
  for (size_t i = 1; i <= mid; ++i) EXPECT_EQ(edges[mid - i], -edges[mid + i]);
  EXPECT_LT(edges.back(), 1e20);
  EXPECT_GE(edges.back() * 1.1, 1e20);
}

TEST(Histogram, NothingToDrawForEmptyOrNonFiniteValues) {
  EXPECT_FALSE(makeHistogram({}).has_value());
  EXPECT_FALSE(makeHistogram({1.0, std::numeric_limits<double>::quiet_NaN()}).has_value());
  EXPECT_FALSE(makeHistogram({std::numeric_limits<double>::infinity()}).has_value());
  EXPECT_FALSE(makeHistogram({1e30}).has_value());  // beyond the outermost edge: numpy drops it
  const auto h = makeHistogram({1e30, 2.0});
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->num, 2.0);  // min/max/num/sum cover every value, the buckets only those inside
  EXPECT_EQ(h->max, 1e30);
  double counted = 0;
  for (double b : h->bucket) counted += b;
  EXPECT_EQ(counted, 1.0);
}

TEST(Histogram, TagsAreCleanedAsSmdebugDoes) {
  EXPECT_EQ(cleanTensorboardTag("weights/Net_fc1.weight"), "weights/Net_fc1.weight");
  EXPECT_EQ(cleanTensorboardTag("my acts/x:0"), "my_acts/x_0");
  EXPECT_EQ(cleanTensorboardTag("//lead"), "lead");
}

// Every histogram event in the worker's TensorBoard files: tag -> steps.
std::map<std::string, std::vector<int64_t>> histogramsIn(const std::string& trialDir) {
  std::map<std::string, std::vector<int64_t>> out;
  const std::string tb = trialDir + "/tensorboard";
  for (const std::string& rel : listFilesRecursive(tb)) {
    std::string bytes, error;
    EXPECT_TRUE(readWholeFile(tb + "/" + rel, &bytes, &error)) << error;
    for (size_t offset = 0; offset < bytes.size();) {
      RecordView r;
      EXPECT_TRUE(parseRecord(bytes, offset, FooterCheck::kPayloadCrc, &r, &error)) << error;
      if (r.size == 0) break;
      offset += r.size;
      tensorboard::Event e;
      EXPECT_TRUE(e.ParseFromArray(r.payload.data(), static_cast<int>(r.payload.size())));
      for (const auto& v : e.summary().value())
        if (v.has_histo()) out[v.tag()].push_back(e.step());
    }
  }
  return out;
}

TEST(Histogram, HookWritesThemOnlyForCollectionsThatAsk) {
  TempDir dir;
  {
    Hook hook(debuggerConfig(R"({"save_interval": 2, "collections": [
                 {"name": "weights", "save_histogram": true},
                 {"name": "biases"},
                 {"name": "losses", "save_histogram": true},
                 {"name": "flags", "include_regex": "^flag", "save_histogram": true}]})"),
              testing::hookOptions(dir.path()));
    const float w[3] = {0.5f, -1.0f, 2.0f};
    const float loss = 1.5f;
    const bool flag[2] = {true, false};
    for (int step = 0; step < 3; ++step) {
      hook.beginStep(Mode::kTrain);
      hook.saveTensor("Net_fc1.weight", DType::kFloat32, {3}, w);
      hook.saveTensor("Net_fc1.bias", DType::kFloat32, {3}, w);
      hook.saveTensor("Loss_output_0", DType::kFloat32, {1}, &loss);
      hook.saveTensor("flag_mask", DType::kBool, {2}, flag);
    }
    hook.close(true);
    EXPECT_EQ(hook.firstError(), "");
  }
  // Not for biases (not asked), losses (a scalar collection) or a bool tensor: smdebug's rules.
  const auto h = histogramsIn(dir.path());
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h.begin()->first, "weights/Net_fc1.weight");
  EXPECT_EQ(h.begin()->second, (std::vector<int64_t>{0, 2}));  // the due global steps
}

}  // namespace
}  // namespace strata::debugger
