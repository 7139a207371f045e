// strata::should_stop() across real processes (mpirun): whichever rank asks, and however it
// asks (its own request, a rule's StopTraining signal, a signal handler, the stop file that
// `strata rules --watch` writes), every rank leaves the loop at the same step.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>
#include <vector>

#include "runtime/stop.h"
#include "strata/group.h"
#include "strata/rules.h"
#include "strata/runtime.h"

namespace strata {
namespace {

using runtime::StopCause;

constexpr int64_t kMaxSteps = 2000;  // 2000 × 10 ms: the stop file is looked for every 0.5 s

// Each test starts with no request anywhere.
class StopMpi : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    world().barrier();
    runtime::resetStop();
    rules::StopSignal::global().reset();
    world().barrier();
  }

  // Runs the loop; `atStep(step)` may ask for a stop. Returns the step at which this rank
  // left (the number of completed steps), and checks that every rank left at the same one.
  template <typename AtStep>
  static int64_t runLoop(AtStep atStep, int64_t sleepMs = 0) {
    int64_t step = 0;
    for (; step < kMaxSteps; ++step) {
      atStep(step);
      if (should_stop()) break;
      if (sleepMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleepMs));
    }
    std::vector<int64_t> all(static_cast<size_t>(size()));
    world().allgather(&step, all.data(), 1, DType::kInt64);
    for (int r = 0; r < size(); ++r) EXPECT_EQ(all[static_cast<size_t>(r)], step) << "rank " << r;
    return step;
  }
};

TEST_F(StopMpi, NoRequestRunsToTheEnd) {
  EXPECT_EQ(runLoop([](int64_t) {}), kMaxSteps);
  EXPECT_EQ(stop_reason(), "");
}

TEST_F(StopMpi, TheLastRankAsksEveryRankStopsAtThatStep) {
  const int last = size() - 1;
  const int64_t stopped = runLoop([&](int64_t step) {
    if (rank() == last && step == 7) runtime::requestStop(StopCause::kUser, "enough");
  });
  EXPECT_EQ(stopped, 7);
  EXPECT_EQ(stop_reason(), rank() == last ? "enough" : "requested on another rank");
}

TEST_F(StopMpi, RuleSignalOnRankZeroStopsEveryRank) {
  const int64_t stopped = runLoop([](int64_t step) {
    if (rank() == 0 && step == 4) rules::StopSignal::global().request("LossNotDecreasing", "loss 0.3 -> 0.4");
  });
  EXPECT_EQ(stopped, 4);
  EXPECT_EQ(stop_reason(), rank() == 0 ? "rule LossNotDecreasing: loss 0.3 -> 0.4" : "a rule on another rank");
}

// The in-process engine of the rank holding the data (the last pipeline stage holds the
// loss) finds the issue: every rank stops at the same step and learns which rule, at which
// step, on which rank; with two ranks' findings, the earlier step wins.
TEST_F(StopMpi, RuleVerdictWithItsStepReachesEveryRank) {
  const int last = size() - 1;
  const int64_t stopped = runLoop([&](int64_t step) {
    if (rank() == last && step == 9) rules::StopSignal::global().request("LossNotDecreasing", "loss 0.3 -> 0.4", 8);
    if (rank() == 0 && last > 0 && step == 9) rules::StopSignal::global().request("ExplodingTensor", "nan", 9);
  });
  EXPECT_EQ(stopped, 9);
  const runtime::AgreedRule a = runtime::agreedRule();
  EXPECT_EQ(a.rule, "LossNotDecreasing");
  EXPECT_EQ(a.step, 8);
  EXPECT_EQ(a.rank, last);
  EXPECT_EQ(a.reason, "loss 0.3 -> 0.4");
  EXPECT_EQ(stop_reason(), "rule LossNotDecreasing: loss 0.3 -> 0.4 (step 8, rank " + std::to_string(last) + ")");
}

void onTerm(int signo) { runtime::requestStopFromSignal(signo); }

TEST_F(StopMpi, SignalOnOneRankStopsEveryRank) {
  const int last = size() - 1;
  auto previous = std::signal(SIGTERM, onTerm);
  const int64_t stopped = runLoop([&](int64_t step) {
    if (rank() == last && step == 3) std::raise(SIGTERM);
  });
  std::signal(SIGTERM, previous);
  EXPECT_EQ(stopped, 3);
  // The strongest cause wins everywhere: a signal outranks rules and user requests.
  EXPECT_EQ(stop_reason(), rank() == last ? "signal Terminated" : "a signal on another rank");
}

TEST_F(StopMpi, StopFileOfAWatcherStopsEveryRank) {
  const std::string stopFile = rules::StopSignal::stopFilePath(outputDir());
  if (rank() == 0) {
    std::filesystem::remove(stopFile);
    runtime::watchStopFile(outputDir());  // as at init, after removing any leftover
  }
  world().barrier();
  int64_t writtenAt = -1;
  const int64_t stopped = runLoop(
      [&](int64_t step) {
        // A separate process would write it; rank 0 writing it is the same file.
        if (rank() == 0 && step == 3) {
          ASSERT_TRUE(rules::StopSignal::writeStopFile(outputDir(), "ExplodingTensor", "NaN in loss"));
          writtenAt = step;
        }
      },
      10);
  EXPECT_LT(stopped, kMaxSteps) << "the stop file was never noticed";
  if (rank() == 0) {
    EXPECT_GE(stopped, writtenAt);
    EXPECT_EQ(stop_reason(), "rule ExplodingTensor: NaN in loss (stop file " + stopFile + ")");
    std::filesystem::remove(stopFile);
  } else {
    EXPECT_EQ(stop_reason(), "a rule on another rank");
  }
}

TEST_F(StopMpi, AgreedAnswerIsStickyWithoutCommunication) {
  runLoop([](int64_t step) {
    if (rank() == 0 && step == 2) runtime::requestStop(StopCause::kUser, "done");
  });
  // Only rank 0 asks again: were this a collective it would wait for the others (and fail
  // at the collective timeout); sticky, it answers at once.
  if (rank() == 0) {
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(should_stop());
  }
}

}  // namespace
}  // namespace strata
