// `strata trace`: strict nesting per track, the merged file against a golden one (pid =
// rank, ranks aligned by their recorded clock base), Perfetto validity, and the command.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "profiler/timeline_file_writer.h"
#include "profiler/trace_merge.h"
#include "profiler_test_util.h"
#include "trace_check.h"

namespace strata::profiler {
namespace {

using testing::readFile;
using testing::TempDir;

constexpr int64_t kT0Us = 1700000000000000;

MergedSlice s(int tid, int64_t ts, int64_t dur, const char* name = "x") {
  return MergedSlice{name, "", 0, tid, ts, dur, nlohmann::json::object()};
}

TEST(Nesting, ContainedAndTouchingSlicesStay) {
  std::vector<MergedSlice> slices = {s(1, 0, 100), s(1, 10, 20), s(1, 30, 70), s(1, 100, 5),
                                     s(1, 40, 0), s(2, 50, 100)};
  EXPECT_EQ(countNestingViolations(slices), 0u);
  EXPECT_EQ(nestSlicesStrictly(slices), 0u);
  for (const auto& x : slices) EXPECT_LT(x.tid, kOverflowTidStride);
}

TEST(Nesting, PartialOverlapMovesToAnOverlapTrack) {
  std::vector<MergedSlice> slices = {s(2, 0, 100, "a"), s(2, 50, 100, "b"), s(2, 60, 10, "c"),
                                     s(2, 120, 50, "d"), s(2, 70, 60, "e")};
  EXPECT_EQ(countNestingViolations(slices), 2u);  // b crosses a's end, e crosses c/b
  EXPECT_EQ(nestSlicesStrictly(slices), 2u);
  EXPECT_EQ(countNestingViolations(slices), 0u);
  std::map<std::string, int> tidOf;
  for (const auto& x : slices) tidOf[x.name] = x.tid;
  EXPECT_EQ(tidOf["a"], 2);
  EXPECT_EQ(tidOf["b"], 2 + kOverflowTidStride);
  EXPECT_EQ(tidOf["c"], 2);  // nests in a
  EXPECT_EQ(tidOf["d"], 2);  // after a ended
}

// Two ranks' timelines: rank 1 started 250 µs after rank 0 and has its own base.
void writeTwoRanks(const std::string& root) {
  for (int rank = 0; rank < 2; ++rank) {
    const int64_t base = kT0Us + rank * 250;
    TimelineFileWriter w(root, std::to_string(rank) + "-algo-1",
                         TimelineFormatter(base, "rank " + std::to_string(rank) + " (host-" +
                                                     (rank ? "b" : "a") + ")",
                                           4000 + rank));
    const int tid = trackId(Track::kCompute);
    w.write({{"fc1", phases::kForward, tid, kT0Us + 1000, 400, 0, {}},
             {"bucket 0", phases::kAllReduce, trackId(Track::kCommunication), kT0Us + 1500,
              300 + rank * 100, 0, {{"bytes", 4096}}},
             {"fc1", phases::kBackward, tid, kT0Us + 1300, 600, 0, {}},  // overlaps fc1 fwd
             {"Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", trackId(Track::kSteps), kT0Us + 900,
              1300, 0, {}}},
            base);
  }
}

TEST(Merge, MatchesTheGoldenFileAndIsValidForPerfetto) {
  TempDir dir;
  writeTwoRanks(dir.str());
  const MergedTrace merged = mergeTimelines(dir.str());
  EXPECT_EQ(merged.report.files, 2u);
  EXPECT_EQ(merged.report.ranks, 2u);
  EXPECT_EQ(merged.report.slices, 8u);
  EXPECT_EQ(merged.report.baseUs, kT0Us);
  EXPECT_EQ(merged.report.movedForNesting, 2u);  // each rank's overlapping backward slice
  std::ostringstream out;
  writeMergedTrace(merged, out);
  testing::expectMatchesGolden(out.str(), "merged.json");

  const nlohmann::json trace = nlohmann::json::parse(out.str());
  EXPECT_EQ(testing::perfettoProblems(trace), std::vector<std::string>{});
  EXPECT_EQ(trace["otherData"]["start_time_since_epoch_in_micros"], kT0Us);
  std::map<int, std::string> processNames;
  for (const auto& e : trace["traceEvents"]) {
    if (e["name"] == "process_name") processNames[e["pid"]] = e["args"]["name"];
    // Same epoch time on both ranks -> same merged ts, whatever each rank's base.
    if (e["ph"] == "X" && e["name"] == "fc1" && e["cat"] == "Forward") {
      EXPECT_EQ(e["ts"], 1000);
    }
  }
  EXPECT_EQ(processNames, (std::map<int, std::string>{{0, "rank 0 (host-a)"}, {1, "rank 1 (host-b)"}}));
}

TEST(Merge, EmptyRunGivesEmptyTrace) {
  TempDir dir;
  const MergedTrace merged = mergeTimelines(dir.str());
  EXPECT_EQ(merged.report.files, 0u);
  EXPECT_TRUE(merged.slices.empty());
}

// The `strata` binary next to the test binary's folder (build/strata), if built.
std::string strataBinary() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto cli = self.parent_path().parent_path() / "strata";
  return !ec && std::filesystem::exists(cli) ? cli.string() : "";
}

TEST(TraceCommand, MergesARunDirectory) {
  const std::string cli = strataBinary();
  if (cli.empty()) GTEST_SKIP() << "the strata CLI is not built next to the tests";
  TempDir dir;
  writeTwoRanks((dir.path() / "profiler-output").string());
  const auto output = dir.path() / "merged.json";
  const std::string cmd = cli + " trace " + dir.str() + " -o " + output.string() + " > " +
                          (dir.path() / "stdout.txt").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const nlohmann::json trace = nlohmann::json::parse(readFile(output));
  EXPECT_EQ(testing::perfettoProblems(trace), std::vector<std::string>{});
  EXPECT_NE(readFile(dir.path() / "stdout.txt").find("merged 8 slices of 2 process(es)"),
            std::string::npos);
  const std::string missing = cli + " trace " + (dir.path() / "nope").string() + " -o " +
                              output.string() + " 2>/dev/null";
  EXPECT_NE(std::system(missing.c_str()), 0);
}

}  // namespace
}  // namespace strata::profiler
