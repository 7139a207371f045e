// Readers counting events in time ranges the way smdebug's own tests do
// (specs/smdebug.md §4.2: test_system_profiler_file_parser, test_system_metric_reader,
// test_algorithm_metric_readers), on fixtures of the same shape under
// tests/profiler/fixtures/readers/ (our own numbers; same counts where the shape allows).
#include <gtest/gtest.h>

#include "profiler/step_times.h"
#include "profiler/system_reader.h"
#include "profiler/timeline_reader.h"
#include "profiler_test_util.h"

namespace strata::profiler {
namespace {

using testing::fixturePath;
using testing::readFile;
using testing::TempDir;

constexpr int64_t kS = 1000000;       // µs per second
constexpr int64_t kT = 1700000000;    // fixture epoch seconds
const std::string kRun = fixturePath("readers/run").string();

size_t countSystem(SystemMetricsReader& r, int64_t startUs, int64_t endUs, std::string type = "") {
  SystemQuery q;
  q.startUs = startUs;
  q.endUs = endUs;
  q.type = std::move(type);
  return r.events(q).size();
}

// A profiler root holding one system file (smdebug's single-file parser test).
std::string rootWith(const TempDir& dir, const std::string& fixture) {
  testing::writeFile(dir.path() / "system/incremental/1700000000.algo-1.json",
                     readFile(fixturePath(fixture)));
  return dir.str();
}

TEST(SystemReader, CountsEventsInTimeRangesOfOneFile) {
  TempDir dir;
  SystemMetricsReader r(rootWith(dir, "readers/sparse.algo-1.json"));
  EXPECT_EQ(countSystem(r, 0, (kT + 10001) * kS), 14u);
  EXPECT_EQ(countSystem(r, 0, (kT + 10001) * kS, "cpu"), 4u);
  EXPECT_EQ(countSystem(r, 0, (kT + 7000) * kS + 850000), 11u);
  // Inclusive on both ends: the event at exactly kT + 9000.95 s counts.
  EXPECT_EQ(countSystem(r, (kT + 9000) * kS + 950000, 2700000000 * kS), 2u);
  EXPECT_EQ(countSystem(r, (kT + 9000) * kS + 950001, 2700000000 * kS), 1u);
  EXPECT_EQ(countSystem(r, (kT + 9000) * kS + 950000, 2700000000 * kS, "gpu"), 2u);
  EXPECT_EQ(countSystem(r, 0, 0, "gpu"), 0u);
  EXPECT_EQ(r.badLines(), 0u);
}

TEST(SystemReader, TornLastLineIsSkippedSilently) {
  TempDir dir;
  SystemMetricsReader r(rootWith(dir, "readers/sparse.algo-1.json.corrupt"));
  EXPECT_EQ(countSystem(r, 0, (kT + 10001) * kS), 13u);
  EXPECT_EQ(countSystem(r, 0, (kT + 10001) * kS, "cpu"), 4u);
  EXPECT_EQ(countSystem(r, 0, (kT + 7000) * kS + 850000), 11u);
  EXPECT_EQ(countSystem(r, (kT + 9000) * kS + 950000, 2700000000 * kS), 1u);
  EXPECT_EQ(r.badLines(), 0u);  // a torn last line is a write in progress, not damage
}

TEST(SystemReader, BadMiddleLineIsSkippedAndCounted) {
  TempDir dir;
  std::string text = readFile(fixturePath("readers/sparse.algo-1.json"));
  text.insert(text.find('\n') + 1, "{not json\n{\"Type\":\"cpu\",\"Value\":1}\n");
  testing::writeFile(dir.path() / "system/incremental/1700000000.algo-1.json", text);
  SystemMetricsReader r(dir.str());
  EXPECT_EQ(countSystem(r, 0, (kT + 10001) * kS), 14u);
  EXPECT_EQ(r.badLines(), 2u);  // unparsable, and missing required keys
}

TEST(SystemReader, CountsAcrossFilesLikeLocalSystemMetricsReader) {
  SystemMetricsReader r(kRun);
  EXPECT_EQ(r.fileStampsUs(), (std::vector<int64_t>{kT * kS, 1700100000 * kS, 1700100060 * kS}));
  EXPECT_EQ(countSystem(r, 1699900000 * kS, 1800000000 * kS), 78u);
  EXPECT_EQ(countSystem(r, 1699900000 * kS, 1800000000 * kS, "cpu"), 68u);
  EXPECT_EQ(countSystem(r, 1699900000 * kS, 1700007000 * kS), 10u);
  EXPECT_EQ(countSystem(r, 1700100065 * kS, 1800000000 * kS), 32u);
  EXPECT_EQ(r.nodes(), std::vector<std::string>{"algo-1"});
}

TEST(SystemReader, FiltersByNodeDimensionAndName) {
  SystemMetricsReader r(kRun);
  SystemQuery q;
  q.dimension = "GPUMemoryUtilization";
  EXPECT_EQ(r.events(q).size(), 6u);
  q.name = "gpu1";
  EXPECT_EQ(r.events(q).size(), 4u);
  q.nodeId = "algo-2";
  EXPECT_EQ(r.events(q).size(), 0u);
  SystemQuery cpu5;
  cpu5.name = "cpu5";
  ASSERT_EQ(r.events(cpu5).size(), 2u);
  EXPECT_EQ(r.events(cpu5)[0].timestampUs, 1700100009232195);
}

TEST(SystemReader, MissingFolderIsEmptyNotAnError) {
  TempDir dir;
  SystemMetricsReader r(dir.str());
  EXPECT_TRUE(r.fileStampsUs().empty());
  EXPECT_TRUE(r.events({}).empty());
}

TEST(TimelineReader, CountsEventsLikeLocalAlgorithmMetricsReader) {
  TimelineReader r(kRun);
  TraceQuery q;
  q.startUs = 1700000000 * kS;
  q.endUs = 1700000015 * kS;
  const auto events = r.events(q);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].nodeId, "algo-1-7");  // smdebug's display form of "7-algo-1"
  EXPECT_EQ(events[0].rank, 7);
  EXPECT_EQ(events[0].phase, "RotationTest");
  EXPECT_EQ(events[0].fileType, "PythontimelineMetrics");
  EXPECT_EQ(events[0].startUs, kT * kS + 7 * kS);  // ts + start_time_since_epoch_in_micros
  EXPECT_EQ(events[0].stepNum(), 8);
}

TEST(TimelineReader, OverlapIsInclusiveAndFilesAreSelectedByName) {
  TimelineReader r(kRun);
  TraceQuery q;
  q.startUs = (kT + 9) * kS + 500000;  // exactly the end of "event 10"
  q.endUs = (kT + 9) * kS + 900000;
  ASSERT_EQ(r.events(q).size(), 1u);
  EXPECT_EQ(r.events(q)[0].name, "event 10");
  q.startUs = (kT + 9) * kS + 500001;
  EXPECT_EQ(r.events(q).size(), 0u);
  q = {};
  q.nodeId = "7-algo-1";
  EXPECT_EQ(r.events(q).size(), 4u);
  q.nodeId = "algo-1-7";
  EXPECT_EQ(r.events(q).size(), 4u);
  q.rank = 3;
  EXPECT_EQ(r.events(q).size(), 0u);
}

TEST(TimelineReader, ReadsAnOpenTornFileOnRequest) {
  TimelineReader closedOnly(kRun);
  EXPECT_EQ(closedOnly.events({}).size(), 4u);
  TimelineReader all(kRun, /*includeOpenFiles=*/true);
  TraceQuery q;
  q.phase = "Step:ModeKeys.TRAIN";
  const auto steps = all.events(q);
  ASSERT_EQ(steps.size(), 2u);  // the third step's line is torn
  EXPECT_EQ(steps[1].stepNum(), 1);
  EXPECT_EQ(steps[1].rank, 5);
  EXPECT_EQ(steps[1].durUs, 81000);
  EXPECT_EQ(all.badLines(), 1u);
  q = {};
  q.nameContains = "Step:ModeKeys";
  EXPECT_EQ(all.events(q).size(), 2u);
}

TEST(TimelineReader, HorovodStyleBeginEndPairsAndFileTypes) {
  const std::string text = R"([
{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "allreduce.fc1.weight"}},
{"name": "NEGOTIATE_ALLREDUCE", "ph": "B", "ts": 1000, "pid": 1, "tid": 1},
{"name": "", "ph": "E", "ts": 1300, "pid": 1, "tid": 1},
{"name": "ALLREDUCE", "ph": "B", "ts": 1300, "pid": 1, "tid": 1},
{"name": "MEMCPY_IN_FUSION_BUFFER", "ph": "B", "ts": 1350, "pid": 1, "tid": 1},
{"name": "", "ph": "E", "ts": 1400, "pid": 1, "tid": 1},
{"name": "", "ph": "E", "ts": 2000, "pid": 1, "tid": 1, "args": {"dtype": "float32"}},
{"name": "", "ph": "E", "ts": 2100, "pid": 2}
])";
  EXPECT_EQ(traceFileType("horovod_timeline.json"), "");
  EXPECT_EQ(traceFileType("model_timeline.json"), "DetailedframeworkMetrics");
  EXPECT_EQ(traceFileType("smdataparallel_timeline.json"), "SMDataParallelMetrics");
  const auto c = parseTraceText(text, "88359-host", traceFileType("horovod_timeline.json"));
  EXPECT_TRUE(c.complete);
  ASSERT_EQ(c.events.size(), 3u);  // the stray E is ignored
  EXPECT_EQ(c.events[0].name, "NEGOTIATE_ALLREDUCE");
  EXPECT_EQ(c.events[0].durUs, 300);
  EXPECT_EQ(c.events[1].name, "MEMCPY_IN_FUSION_BUFFER");  // inner pair closes first
  EXPECT_EQ(c.events[2].name, "ALLREDUCE");
  EXPECT_EQ(c.events[2].durUs, 700);
  EXPECT_EQ(c.events[2].args["dtype"], "float32");
  EXPECT_EQ(c.events[2].phase, "allreduce.fc1.weight");
  EXPECT_EQ(c.events[2].nodeId, "88359-host");
  EXPECT_EQ(c.events[2].rank, -1);
}

TEST(StepTimes, ParsesAndToleratesATornLine) {
  const std::string text =
      "{\"rank\":1,\"node\":\"1-algo-1\",\"step\":0,\"mode\":\"TRAIN\",\"start_us\":10,\"dur_us\":5}\n"
      "{\"rank\":1,\"node\":\"1-algo-1\",\"step\":1,\"mode\":\"TRAIN\",\"start_us\":15,\"dur_us\":7}\n"
      "{\"rank\":1,\"node\":\"1-al";
  size_t bad = 0;
  const auto steps = parseStepTimesText(text, &bad);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(bad, 1u);
  EXPECT_EQ(steps[1].step, 1);
  EXPECT_EQ(steps[1].durUs, 7);
  EXPECT_EQ(steps[1].nodeId, "1-algo-1");
}

}  // namespace
}  // namespace strata::profiler
