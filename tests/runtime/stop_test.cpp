// strata::should_stop() without a runtime (this process's own requests), its stop-file watch,
// and the pure decisions behind them. The multi-rank agreement is tested under mpirun in
// tests/rules_mpi/.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "runtime/stop.h"
#include "strata/rules.h"
#include "strata/runtime.h"

namespace strata::runtime {
namespace {

namespace fs = std::filesystem;

class StopTest : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    watchStopFile("");
    resetStop();
    rules::StopSignal::global().reset();
  }
  static fs::path freshDir(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("strata_stop_" + name + "_" + std::to_string(getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
  }
};

TEST(StopDecisions, CheckIsDueOnceTheIntervalHasPassed) {
  EXPECT_FALSE(stopFileCheckDue(1499, 1000, 500));
  EXPECT_TRUE(stopFileCheckDue(1500, 1000, 500));
  EXPECT_TRUE(stopFileCheckDue(1000, 1000, 0));
  EXPECT_TRUE(stopFileCheckDue(0, INT64_MIN / 2, 500));  // never checked yet
}

TEST(StopDecisions, LeftoverFilesOfEarlierRunsDoNotCount) {
  const int64_t since = 1'700'000'000'000;
  EXPECT_TRUE(stopFileIsCurrent(since + 1, since));
  EXPECT_TRUE(stopFileIsCurrent(since - kStopFileClockSlackMs, since));
  EXPECT_FALSE(stopFileIsCurrent(since - kStopFileClockSlackMs - 1, since));
}

TEST(StopDecisions, StopFileTextNamesTheRule) {
  EXPECT_EQ(stopFileRequestText(R"({"rule": "LossNotDecreasing", "reason": "loss 0.3 -> 0.4"})", "/r/s.json"),
            "rule LossNotDecreasing: loss 0.3 -> 0.4 (stop file /r/s.json)");
  EXPECT_EQ(stopFileRequestText(R"({"rule": "X"})", "/r/s.json"), "rule X (stop file /r/s.json)");
  EXPECT_EQ(stopFileRequestText("", "/r/s.json"), "stop file /r/s.json");
  EXPECT_EQ(stopFileRequestText("[1, 2", "/r/s.json"), "stop file /r/s.json");
  EXPECT_EQ(stopFileRequestText(R"({"rule": 3})", "/r/s.json"), "stop file /r/s.json");
}

TEST_F(StopTest, NothingRequestedMeansGoOn) {
  ASSERT_FALSE(isInitialized());
  EXPECT_FALSE(should_stop());
  EXPECT_EQ(stop_reason(), "");
  EXPECT_EQ(localStopCause(), StopCause::kNone);
}

TEST_F(StopTest, RuleSignalStopsAndTheAnswerIsSticky) {
  rules::StopSignal::global().request("LossNotDecreasing", "loss did not decrease");
  EXPECT_TRUE(should_stop());
  EXPECT_EQ(stop_reason(), "rule LossNotDecreasing: loss did not decrease");
  rules::StopSignal::global().reset();
  EXPECT_TRUE(should_stop());  // agreed once: stays stopped until resetStop()
  resetStop();
  EXPECT_FALSE(should_stop());
}

TEST_F(StopTest, StrongestLocalCauseAndFirstTextWin) {
  requestStop(StopCause::kUser, "enough");
  requestStop(StopCause::kRule, "ignored: second request");
  EXPECT_EQ(localStopCause(), StopCause::kUser);
  rules::StopSignal::global().request("R", "why");
  EXPECT_EQ(localStopCause(), StopCause::kRule);
  requestStopFromSignal(SIGTERM);
  EXPECT_EQ(localStopCause(), StopCause::kSignal);
  EXPECT_EQ(stopSignalNumber(), SIGTERM);
  EXPECT_TRUE(should_stop());
  EXPECT_NE(stop_reason().find("signal"), std::string::npos) << stop_reason();
}

TEST_F(StopTest, EndOfRunConsumesRequestsButNotSignals) {
  requestStop(StopCause::kUser, "enough");
  rules::StopSignal::global().request("R", "why");
  EXPECT_TRUE(should_stop());
  endStopRun();
  EXPECT_FALSE(rules::StopSignal::global().requested());
  EXPECT_FALSE(should_stop());  // the next run starts clean
  EXPECT_EQ(stop_reason(), "");
  requestStopFromSignal(SIGINT);
  EXPECT_TRUE(should_stop());
  endStopRun();
  EXPECT_TRUE(should_stop());  // the process was asked to end: the next run stops at once
  EXPECT_EQ(localStopCause(), StopCause::kSignal);
}

TEST_F(StopTest, StopFileWrittenDuringTheRunStops) {
  const fs::path dir = freshDir("file");
  watchStopFile(dir.string(), 0);
  EXPECT_FALSE(should_stop());
  ASSERT_TRUE(rules::StopSignal::writeStopFile(dir.string(), "ExplodingTensor", "NaN in loss"));
  EXPECT_TRUE(should_stop());
  EXPECT_EQ(stop_reason(), "rule ExplodingTensor: NaN in loss (stop file " +
                               rules::StopSignal::stopFilePath(dir.string()) + ")");
  fs::remove_all(dir);
}

TEST_F(StopTest, StopFileIsLookedForAtMostOncePerInterval) {
  const fs::path dir = freshDir("interval");
  watchStopFile(dir.string(), 3600 * 1000);
  EXPECT_FALSE(should_stop());  // the first call looks (and finds nothing)
  ASSERT_TRUE(rules::StopSignal::writeStopFile(dir.string(), "R", "why"));
  EXPECT_FALSE(should_stop());  // the next look is an hour away
  // Re-armed within the clock slack of the file's mtime: the file still counts.
  watchStopFile(dir.string(), 0);
  EXPECT_TRUE(should_stop());
  fs::remove_all(dir);
}

TEST_F(StopTest, LeftoverStopFileOfAnEarlierRunIsIgnored) {
  const fs::path dir = freshDir("leftover");
  ASSERT_TRUE(rules::StopSignal::writeStopFile(dir.string(), "R", "an earlier run"));
  const fs::path file = rules::StopSignal::stopFilePath(dir.string());
  fs::last_write_time(file, fs::last_write_time(file) - std::chrono::hours(1));
  watchStopFile(dir.string(), 0);
  EXPECT_FALSE(should_stop());
  EXPECT_FALSE(should_stop());
  watchStopFile("");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata::runtime
