// Trace files: golden content (deterministic clock and pid), smdebug's layout (metadata
// first in every file, phase pids, string step_num, names), Perfetto validity, rotation,
// readability while open, and the step timer's file.
#include <gtest/gtest.h>

#include "profiler/layout.h"
#include "profiler/timeline_file_writer.h"
#include "profiler/timeline_reader.h"
#include "profiler_test_util.h"
#include "trace_check.h"

namespace strata::profiler {
namespace {

using testing::readFile;
using testing::TempDir;

constexpr int64_t kT0Us = 1700000000000000;  // 2023-11-14T22:13:20Z
constexpr int64_t kOsPid = 4242;

TimelineEvent slice(const char* name, const char* phase, Track track, int64_t startOffsetUs,
                    int64_t durUs, int64_t step, std::vector<Arg> args = {}) {
  return TimelineEvent{name, phase, trackId(track), kT0Us + startOffsetUs, durUs, step, std::move(args)};
}

std::vector<TimelineEvent> stepFiveEvents() {
  return {
      slice("next batch", phases::kDataLoaderIter, Track::kDataLoading, 1000, 500, 4),
      slice("fc1", phases::kForward, Track::kCompute, 2000, 1200, 5, {{"layer", 0}}),
      slice("fc2", phases::kForward, Track::kCompute, 3300, 700, 5, {{"layer", 1}}),
      slice("fc2", phases::kBackward, Track::kCompute, 4100, 900, 5),
      slice("bucket 0", phases::kAllReduce, Track::kCommunication, 4600, 2500, 5,
            {{"bucket", 0}, {"bytes", size_t{1} << 20}, {"dtype", "float32"}, {"ratio", 0.5}}),
      slice("wait bucket 0", phases::kAllReduceWait, Track::kCompute, 5100, 2000, 5),
      slice("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", Track::kSteps, 1800, 5400, 5),
  };
}

std::vector<TimelineEvent> stepSixEvents() {
  return {
      slice("send activation mb0", phases::kPipeline, Track::kPipeline, 7400, 300, 6),
      slice("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", Track::kSteps, 7300, 1000, 6),
  };
}

TEST(TimelineFileWriter, WritesTheGoldenFiles) {
  TempDir dir;
  TimelineFileWriter writer(dir.str(), "0-algo-1",
                            TimelineFormatter(kT0Us, "rank 0 (host-a)", kOsPid));
  writer.write(stepFiveEvents(), kT0Us + 8000);
  writer.closeFile();
  writer.write(stepSixEvents(), kT0Us + 9000);
  writer.closeFile();
  ASSERT_EQ(writer.closedFiles().size(), 2u);
  // The name stamp is the largest event end; the hour folder is its UTC hour.
  EXPECT_EQ(writer.closedFiles()[0],
            (dir.path() / "framework/pevents/2023111422/1700000000007200_0-algo-1_pythontimeline.json")
                .string());
  EXPECT_EQ(writer.closedFiles()[1],
            (dir.path() / "framework/pevents/2023111422/1700000000008300_0-algo-1_pythontimeline.json")
                .string());
  testing::expectMatchesGolden(readFile(writer.closedFiles()[0]), "pythontimeline_1.json");
  testing::expectMatchesGolden(readFile(writer.closedFiles()[1]), "pythontimeline_2.json");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / openTraceRelPath("0-algo-1")));
}

TEST(TimelineFileWriter, EveryFileIsAValidPerfettoArrayWithSmdebugMetadata) {
  TempDir dir;
  TimelineFileWriter writer(dir.str(), "3-algo-2", TimelineFormatter(kT0Us, "rank 3 (b)", kOsPid));
  writer.write(stepFiveEvents(), kT0Us);
  writer.closeFile();
  writer.write(stepSixEvents(), kT0Us);
  writer.closeFile();
  for (const std::string& path : writer.closedFiles()) {
    const nlohmann::json trace = nlohmann::json::parse(readFile(path));  // closed array
    ASSERT_TRUE(trace.is_array());
    EXPECT_EQ(testing::perfettoProblems(trace), std::vector<std::string>{}) << path;
    // smdebug: the first event is pid 0's process_name carrying the time base.
    EXPECT_EQ(trace[0]["name"], "process_name");
    EXPECT_EQ(trace[0]["pid"], 0);
    EXPECT_EQ(trace[0]["args"]["start_time_since_epoch_in_micros"], kT0Us);
    EXPECT_EQ(trace[0]["args"]["name"], "rank 3 (b)");
    EXPECT_EQ(trace[1]["name"], "process_sort_index");
    for (const auto& e : trace) {
      if (e["ph"] != "X") continue;
      EXPECT_TRUE(e["args"]["step_num"].is_string()) << e.dump();
      EXPECT_EQ(e["args"]["pid"], kOsPid);
    }
  }
  // The phase -> pid numbering lasts the writer's lifetime: the Step phase keeps its pid
  // in the second file and is declared again there.
  const auto second = nlohmann::json::parse(readFile(writer.closedFiles()[1]));
  int stepPid = -1;
  for (const auto& e : second)
    if (e["name"] == "Step:ModeKeys.TRAIN" && e["ph"] == "X") stepPid = e["pid"];
  EXPECT_EQ(stepPid, 6);  // the 6th phase first used in file 1
}

TEST(TimelineFileWriter, OpenFileReadsLineByLine) {
  TempDir dir;
  TimelineFileWriter writer(dir.str(), "0-algo-1", TimelineFormatter(kT0Us, "rank 0 (a)", kOsPid));
  writer.write(stepFiveEvents(), kT0Us);
  const auto tmp = dir.path() / openTraceRelPath("0-algo-1");
  ASSERT_TRUE(std::filesystem::exists(tmp));
  std::string text = readFile(tmp);
  EXPECT_TRUE(nlohmann::json::parse(text, nullptr, false).is_discarded());  // not closed yet
  EXPECT_EQ(parseTraceText(text, "0-algo-1", "PythontimelineMetrics").events.size(), 7u);
  text.resize(text.size() - 20);  // torn mid-line
  const auto torn = parseTraceText(text, "0-algo-1", "PythontimelineMetrics");
  EXPECT_EQ(torn.events.size(), 6u);
  EXPECT_EQ(torn.badLines, 1u);
}

TEST(TimelineFileWriter, RotatesBySizeAndInterval) {
  RotationPolicy policy;
  policy.maxFileBytes = 2000;
  policy.closeInterval = std::chrono::seconds(60);
  EXPECT_FALSE(shouldRotate(1999, 0, 59'999'999, policy));
  EXPECT_TRUE(shouldRotate(2001, 0, 1, policy));
  EXPECT_TRUE(shouldRotate(10, 0, 60'000'000, policy));

  TempDir dir;
  TimelineFileWriter writer(dir.str(), "0-algo-1", TimelineFormatter(kT0Us, "r", kOsPid), policy);
  writer.write(stepFiveEvents(), kT0Us);        // ~2800 bytes
  writer.write(stepSixEvents(), kT0Us + 1000);  // rotates first
  writer.maybeRotate(kT0Us + 1000);             // small and young: stays open
  EXPECT_EQ(writer.closedFiles().size(), 1u);
  writer.maybeRotate(kT0Us + 61'000'000);       // idle past the interval
  EXPECT_EQ(writer.closedFiles().size(), 2u);
}

TEST(TimelineFileWriter, SameLastEndDoesNotOverwrite) {
  TempDir dir;
  TimelineFileWriter writer(dir.str(), "0-algo-1", TimelineFormatter(kT0Us, "r", kOsPid));
  for (int i = 0; i < 2; ++i) {
    writer.write(stepSixEvents(), kT0Us);
    writer.closeFile();
  }
  ASSERT_EQ(writer.closedFiles().size(), 2u);
  EXPECT_NE(writer.closedFiles()[0], writer.closedFiles()[1]);
  EXPECT_TRUE(std::filesystem::exists(writer.closedFiles()[0]));
}

TEST(TimelineFileWriter, RecoversTheOpenFileOfACrashedRun) {
  TempDir dir;
  const auto tmp = dir.path() / openTraceRelPath("0-algo-1");
  std::string leftover;
  {
    TimelineFileWriter crashed(dir.str(), "0-algo-1", TimelineFormatter(kT0Us, "r", kOsPid));
    crashed.write(stepFiveEvents(), kT0Us);
    leftover = readFile(tmp);
  }  // (its destructor closes the file; put the crashed state back)
  std::filesystem::remove_all(dir.path() / "framework/pevents");
  testing::writeFile(tmp, leftover.substr(0, leftover.size() - 30));  // torn last line

  TimelineFileWriter next(dir.str(), "0-algo-1", TimelineFormatter(kT0Us + 9000, "r", kOsPid));
  next.write(stepSixEvents(), kT0Us + 9000);
  next.closeFile();
  ASSERT_EQ(next.closedFiles().size(), 2u);
  const auto recovered = nlohmann::json::parse(readFile(next.closedFiles()[0]));  // valid JSON
  EXPECT_EQ(testing::perfettoProblems(recovered), std::vector<std::string>{});
  size_t events = 0;
  for (const auto& e : recovered) events += e["ph"] == "X";
  EXPECT_EQ(events, 6u);  // the 7th event was torn
  // Named after its largest end among the 6 whole events (the AllReduce, at +7100 µs).
  EXPECT_NE(next.closedFiles()[0].find("1700000000007100_0-algo-1"), std::string::npos);
}

TEST(StepTimeWriter, WritesTheGoldenFile) {
  TempDir dir;
  {
    StepTimeWriter writer(dir.str(), "1-algo-1", 1);
    writer.write({{0, Mode::kTrain, kT0Us, 250000}, {1, Mode::kTrain, kT0Us + 250100, 84000}});
    writer.write({{0, Mode::kEval, kT0Us + 400000, 12000}});
  }
  testing::expectMatchesGolden(readFile(dir.path() / "steps/1-algo-1_steps.jsonl"), "steps.jsonl");
}

TEST(Arg, RendersJsonValues) {
  EXPECT_EQ(Arg("n", 3).json, "3");
  EXPECT_EQ(Arg("n", uint32_t{4000000000u}).json, "4000000000");
  EXPECT_EQ(Arg("n", int64_t{-5}).json, "-5");
  EXPECT_EQ(Arg("b", true).json, "true");
  EXPECT_EQ(Arg("d", 0.1).json, "0.1");
  EXPECT_EQ(Arg("d", 1.0 / 0.0).json, "null");
  EXPECT_EQ(Arg("s", "a \"quoted\"\n name").json, "\"a \\\"quoted\\\"\\n name\"");
  EXPECT_EQ(Arg("s", std::string("x")).json, "\"x\"");
  EXPECT_EQ(Arg("s", std::string("bad \xff utf8")).json, "\"bad \xef\xbf\xbd utf8\"");
}

TEST(Layout, NodeIdsAndTraceNames) {
  EXPECT_EQ(rankNodeId(3, 1), "3-algo-2");
  EXPECT_EQ(normalizeNodeId("3-algo-2"), "algo-2-3");
  EXPECT_EQ(normalizeNodeId("905-b88ab1bb8259"), "905-b88ab1bb8259");
  EXPECT_EQ(rankOfNodeId("3-algo-2"), 3);
  EXPECT_EQ(rankOfNodeId("algo-2"), -1);
  EXPECT_EQ(rankOfNodeId("0001"), -1);
  const auto name = parseTraceFileName("/r/framework/pevents/2020071317/"
                                       "1594662624718694_905-b88ab1bb8259_pythontimeline.json");
  ASSERT_TRUE(name);
  EXPECT_EQ(name->stampUs, 1594662624718694);
  EXPECT_EQ(name->nodeId, "905-b88ab1bb8259");
  EXPECT_EQ(name->suffix, "pythontimeline.json");
  EXPECT_FALSE(parseTraceFileName("/r/framework/1594662624718694_0-algo-1_pythontimeline.json"));
  EXPECT_FALSE(parseTraceFileName("/r/framework/pevents/x/1594662624718694_pythontimeline.json"));
}

}  // namespace
}  // namespace strata::profiler
