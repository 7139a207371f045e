// Real-process checkpoint tests: a 2-rank data-parallel job (checkpoint_train_worker under
// mpiexec) is stopped by SIGTERM at a random step and resumed, or SIGKILLed at a random
// moment and restarted by `strata run --max-restarts`; it must reach bitwise the same
// parameters (params_sha256) as an uninterrupted run, never hang, and never leave a corrupt
// newest checkpoint. Every scenario runs twice: checkpoints written at the step boundary
// ("Sync") and in the background ("Async"); the async-only tests send SIGTERM while a
// background write is held in flight, and fail one rank's background write. Seeds are
// printed; STRATA_TEST_SEED reproduces a run.
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iostream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/catalog.h"
#include "strata/exit_codes.h"
#include "testing/child_process.h"
#include "testing/worker_driver.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using namespace strata::testing;  // ChildProcess, the worker paths, file helpers

// Every job here finishes in a few seconds; a run still going after this is a hang.
constexpr milliseconds kWallLimit{60000};

uint64_t testSeed() {
  if (const char* s = std::getenv("STRATA_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
}

struct Result {
  bool exited = false;
  int code = -1;       // exit code, or 128 + signal
  bool timedOut = false;
  std::string output;  // stdout + stderr
};

// Runs argv (in its own process group, so a timeout kills mpiexec's ranks too) with output to
// `log`, a fresh file. `during` runs on the calling thread while the process lives (fault
// injection).
Result run(const std::vector<std::string>& argv, const std::string& log,
           const std::function<void(ChildProcess&)>& during = nullptr) {
  fs::remove(log);
  Result r;
  try {
    ChildProcess job(argv, log);
    if (during) during(job);
    r.timedOut = !job.wait(kWallLimit, &r.code);
    r.exited = !r.timedOut;
    r.output = job.output();
  } catch (const std::exception& e) {
    r.output = e.what();
  }
  return r;
}

// Waits until `path` exists, the job has ended, or 20 s passed; whether it exists.
bool waitForFile(const std::string& path, ChildProcess& job) {
  return strata::testing::waitForFile(path, job, milliseconds(20000));
}

std::vector<std::string> mpiexec(int ranks, const std::vector<std::string>& workerArgs) {
  std::vector<std::string> argv = {kMpiexec, "-n", std::to_string(ranks), kTrainWorker};
  argv.insert(argv.end(), workerArgs.begin(), workerArgs.end());
  return argv;
}

std::string freshDir(const std::string& name) {
  const std::string dir = kRunRoot + "/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The worker's arguments for a run in `dir`: the scenario's flags, then this run's own.
std::vector<std::string> workerArgs(const std::string& dir, const std::vector<std::string>& flags,
                                    const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"--run-dir", dir};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The second half of a stop-and-resume scenario: a 2-rank run with --resume continues from
// `fromStep` and ends with the uninterrupted run's parameters.
void expectResumesExactly(const std::string& dir, const std::vector<std::string>& flags, const std::string& fromStep,
                          const std::string& expected, const std::string& finalStep = "") {
  const Result resumed = run(mpiexec(2, workerArgs(dir, flags, {"--resume"})), dir + "/second.txt");
  ASSERT_FALSE(resumed.timedOut) << resumed.output;
  EXPECT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(lastValueOf(resumed.output, "resumed", "step"), fromStep) << resumed.output;
  if (!finalStep.empty()) {
    EXPECT_EQ(lastValueOf(resumed.output, "final:", "step"), finalStep) << resumed.output;
  }
  EXPECT_EQ(lastValueOf(resumed.output, "final:", "params_sha256"), expected) << resumed.output;
}

class CheckpointProcess : public ::testing::Test {
 public:
  void SetUp() override {
    if (kMpiexec.empty()) GTEST_SKIP() << "built without MPI";
    allowMpiexecInContainers();
  }
  // The uninterrupted run's final params_sha256 for these flags (cached per flag set).
  std::string reference(const std::vector<std::string>& flags, const std::string& name) {
    const std::string dir = freshDir(name);
    const Result r = run(mpiexec(2, workerArgs(dir, flags)), dir + "/log.txt");
    EXPECT_EQ(r.code, 0) << r.output;
    const std::string hash = lastValueOf(r.output, "final:", "params_sha256");
    EXPECT_EQ(hash.size(), 64u) << r.output;
    return hash;
  }
};

// The same scenarios with checkpoints written at the step boundary and in the background.
class CheckpointModes : public CheckpointProcess, public ::testing::WithParamInterface<bool> {
 public:
  bool async() const { return GetParam(); }
  // Worker flags for this mode.
  std::vector<std::string> withMode(std::vector<std::string> flags) const {
    if (async()) flags.push_back("--async");
    return flags;
  }
  std::string name(const std::string& base) const { return base + (async() ? "-async" : "-sync"); }
};

std::string modeName(const ::testing::TestParamInfo<bool>& info) { return info.param ? "Async" : "Sync"; }

void expectNewestComplete(const std::string& root) {
  const auto entries = strata::checkpoint::listCheckpoints(root);
  ASSERT_FALSE(entries.empty()) << "no checkpoint in " << root;
  // The newest directory with a manifest must verify: a manifest is never written early.
  for (const auto& e : entries) {
    if (!e.hasManifest) continue;
    const auto v = strata::checkpoint::verifyCheckpoint(e.path);
    EXPECT_TRUE(v.complete) << e.path << ": " << v.why;
    return;
  }
  ADD_FAILURE() << "no checkpoint with a manifest in " << root;
}

void resumeExactly(CheckpointModes& t, const std::string& name, bool partial,
                   const std::vector<std::string>& extra = {}) {
  const uint64_t seed = testSeed();
  std::mt19937_64 rng(seed);
  const int64_t steps = 24;
  const int64_t stopAt = 1 + static_cast<int64_t>(rng() % (steps - 2));  // 1 .. steps-2
  const int victim = static_cast<int>(rng() % 2);
  std::cout << "seed " << seed << " (STRATA_TEST_SEED reproduces): SIGTERM to rank " << victim << " at step "
            << stopAt << std::endl;
  std::vector<std::string> flags = t.withMode({"--steps", std::to_string(steps), "--every", "5"});
  if (partial) flags.push_back("--partial");
  flags.insert(flags.end(), extra.begin(), extra.end());
  const std::string expected = t.reference(flags, name + "-reference");
  ASSERT_EQ(expected.size(), 64u);

  const std::string dir = freshDir(name);
  const std::vector<std::string> first =
      workerArgs(dir, flags, {"--sigterm-at-step", std::to_string(stopAt), "--sigterm-rank", std::to_string(victim)});
  const Result stopped = run(mpiexec(2, first), dir + "/first.txt");
  ASSERT_FALSE(stopped.timedOut) << stopped.output;
  EXPECT_EQ(stopped.code, strata::kExitStopped) << stopped.output;
  EXPECT_EQ(lastValueOf(stopped.output, "final:", "step"), std::to_string(stopAt)) << stopped.output;
  expectNewestComplete(dir + "/ckpt");

  expectResumesExactly(dir, flags, std::to_string(stopAt), expected, std::to_string(steps));
}

TEST_P(CheckpointModes, ExactResumeAfterSigtermAtARandomStepFull) {
  resumeExactly(*this, name("sigterm-full"), false);
}

TEST_P(CheckpointModes, ExactResumeAfterSigtermAtARandomStepPartial) {
  resumeExactly(*this, name("sigterm-partial"), true);
}

// Model parallel: a 2-stage pipeline, every stage writing its own shard.
TEST_P(CheckpointModes, ExactResumeAfterSigtermAtARandomStepPipelineTwoStages) {
  resumeExactly(*this, name("sigterm-pipeline"), false, {"--pp", "2"});
}

// The signal comes from outside at an arbitrary moment (as a spot reclaim does), to one rank.
TEST_P(CheckpointModes, ExternalSigtermToOneRankStopsBothWithACheckpoint) {
  const uint64_t seed = testSeed();
  std::mt19937_64 rng(seed);
  const int victim = static_cast<int>(rng() % 2);
  const int delayMs = 100 + static_cast<int>(rng() % 600);
  std::cout << "seed " << seed << ": SIGTERM to rank " << victim << " " << delayMs << " ms into training"
            << std::endl;
  const std::vector<std::string> flags = withMode({"--steps", "400", "--every", "1000", "--sleep-ms", "10"});
  const std::string dir = freshDir(name("sigterm-external"));
  const Result r = run(mpiexec(2, workerArgs(dir, flags)), dir + "/log.txt", [&](ChildProcess& job) {
    const std::string pidFile = dir + "/pids/rank-" + std::to_string(victim) + ".pid";
    if (!waitForFile(pidFile, job)) return;
    std::this_thread::sleep_for(milliseconds(delayMs));
    const pid_t pid = static_cast<pid_t>(std::atol(readWholeFile(pidFile).c_str()));
    if (pid > 0) kill(pid, SIGTERM);
  });
  ASSERT_FALSE(r.timedOut) << r.output;
  EXPECT_EQ(r.code, strata::kExitStopped) << r.output;
  const std::string step = lastValueOf(r.output, "final:", "step");
  ASSERT_FALSE(step.empty()) << r.output;
  EXPECT_EQ(lastValueOf(r.output, "saved", "step"), step) << "the stop wrote a checkpoint at the step it ended\n"
                                                         << r.output;
  expectNewestComplete(dir + "/ckpt");
}

// SIGKILL of a random rank at a random moment (during a step or a checkpoint write); `strata
// run` restarts the job, which resumes from the newest complete checkpoint. 5 runs per
// checkpoint kind, 10 in all; every run of the suite draws new victims and moments (the seed
// is printed), so CI runs add up to a soak (STRATA_SIGKILL_RUNS=N runs N per kind at once).
TEST_P(CheckpointModes, SigkillOfARandomRankAtRandomMomentsRestartAndFinishExactly) {
  const uint64_t seed = testSeed();
  std::mt19937_64 rng(seed);
  std::cout << "seed " << seed << " (STRATA_TEST_SEED reproduces)" << std::endl;
  const std::vector<std::string> flags = withMode({"--steps", "12", "--every", "2", "--sleep-ms", "25"});
  const std::string expected = reference(flags, name("sigkill-reference"));
  ASSERT_EQ(expected.size(), 64u);
  const char* runsEnv = std::getenv("STRATA_SIGKILL_RUNS");
  const int kRuns = runsEnv ? std::max(1, std::atoi(runsEnv)) : 5;
  int restarted = 0;
  for (int i = 0; i < kRuns; ++i) {
    const std::string dir = freshDir(name("sigkill-" + std::to_string(i)));
    const int victim = static_cast<int>(rng() % 2);
    const int delayMs = static_cast<int>(rng() % 400);
    std::vector<std::string> argv = {kStrataCli, "run", "--max-restarts", "4", "--restart-delay-ms", "50", "--",
                                     kMpiexec, "-n", "2", kTrainWorker, "--run-dir", dir, "--resume"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    const Result r = run(argv, dir + "/log.txt", [&](ChildProcess& job) {
      const std::string pidFile = dir + "/pids/rank-" + std::to_string(victim) + ".pid";
      if (!waitForFile(pidFile, job)) return;
      std::this_thread::sleep_for(milliseconds(delayMs));
      const pid_t pid = static_cast<pid_t>(std::atol(readWholeFile(pidFile).c_str()));
      if (pid > 0) kill(pid, SIGKILL);
    });
    SCOPED_TRACE("run " + std::to_string(i) + ": SIGKILL to rank " + std::to_string(victim) + " " +
                 std::to_string(delayMs) + " ms after it started; log " + dir + "/log.txt");
    ASSERT_FALSE(r.timedOut) << "hang\n" << r.output;
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_EQ(lastValueOf(r.output, "final:", "params_sha256"), expected) << r.output;
    expectNewestComplete(dir + "/ckpt");
    if (r.output.find("restart 1 of") != std::string::npos) ++restarted;
  }
  std::cout << restarted << " of " << kRuns << " runs were restarted after the kill" << std::endl;
  EXPECT_GE(restarted, kRuns / 2) << "most kills should land while the job runs";
}

// Incremental training: a full checkpoint of a 2-rank job continues in a 1-rank job.
TEST_P(CheckpointModes, FullCheckpointFromTwoRanksResumesOnOneRank) {
  const std::string dir = freshDir(name("two-to-one"));
  std::vector<std::string> args = withMode({"--run-dir", dir, "--steps", "6", "--every", "3"});
  const Result two = run(mpiexec(2, args), dir + "/two.txt");
  ASSERT_EQ(two.code, 0) << two.output;
  const std::string savedHash = lastValueOf(two.output, "saved", "params_sha256");
  args = withMode({"--run-dir", dir, "--steps", "9", "--every", "3", "--resume"});
  const Result one = run(mpiexec(1, args), dir + "/one.txt");
  ASSERT_EQ(one.code, 0) << one.output;
  EXPECT_EQ(lastValueOf(one.output, "resumed", "step"), "6") << one.output;
  EXPECT_EQ(lastValueOf(one.output, "resumed", "params_sha256"), savedHash) << one.output;
  EXPECT_EQ(lastValueOf(one.output, "final:", "step"), "9") << one.output;
}

// SIGTERM while a background write is in flight: the write of step 5 is held mid-shard until
// the signal has been sent (and a save waits for it); the stop path must publish it, then
// write and publish the final checkpoint, exit 75, and resume exactly.
void sigtermDuringBackgroundWrite(CheckpointProcess& t, const std::string& name, bool partial) {
  const uint64_t seed = testSeed();
  std::mt19937_64 rng(seed);
  const int victim = static_cast<int>(rng() % 2);
  std::cout << "seed " << seed << ": SIGTERM to rank " << victim << " while step 5 is being written" << std::endl;
  std::vector<std::string> flags = {"--steps", "24", "--every", "5", "--sleep-ms", "10", "--async"};
  if (partial) flags.push_back("--partial");
  const std::string expected = t.reference(flags, name + "-reference");
  ASSERT_EQ(expected.size(), 64u);

  const std::string dir = freshDir(name);
  const std::vector<std::string> first = workerArgs(dir, flags, {"--hold-write-at-step", "5"});
  bool signalled = false;
  const Result stopped = run(mpiexec(2, first), dir + "/first.txt", [&](ChildProcess& job) {
    if (!waitForFile(dir + "/held/rank-0", job)) return;  // rank 0 writes a shard in both kinds
    const std::string pidFile = dir + "/pids/rank-" + std::to_string(victim) + ".pid";
    const pid_t pid = static_cast<pid_t>(std::atol(readWholeFile(pidFile).c_str()));
    signalled = pid > 0 && kill(pid, SIGTERM) == 0;
    std::ofstream(dir + "/release") << "go\n";
  });
  ASSERT_FALSE(stopped.timedOut) << stopped.output;
  ASSERT_TRUE(signalled) << "the write of step 5 was never held\n" << stopped.output;
  EXPECT_EQ(stopped.code, strata::kExitStopped) << stopped.output;
  const std::string step = lastValueOf(stopped.output, "final:", "step");
  ASSERT_FALSE(step.empty()) << stopped.output;
  EXPECT_GT(std::stoll(step), 5) << stopped.output;
  EXPECT_EQ(lastValueOf(stopped.output, "saved", "step"), step) << stopped.output;
  EXPECT_GE(std::stoll("0" + lastValueOf(stopped.output, "stats:", "waited")), 1)
      << "a save waited for the held write\n" << stopped.output;
  expectNewestComplete(dir + "/ckpt");
  const auto newest = strata::checkpoint::findNewestComplete(dir + "/ckpt");
  ASSERT_TRUE(newest);
  EXPECT_EQ(std::to_string(newest->manifest.step), step);

  expectResumesExactly(dir, flags, step, expected);
}

TEST_F(CheckpointProcess, AsyncSigtermDuringABackgroundWriteFull) { sigtermDuringBackgroundWrite(*this, "held-full", false); }

TEST_F(CheckpointProcess, AsyncSigtermDuringABackgroundWritePartial) {
  sigtermDuringBackgroundWrite(*this, "held-partial", true);
}

// Rank 1 cannot write its shard of step 10 (its temporary file's path is taken by a
// directory: the tests run as root, whom permissions do not stop). The write fails in the
// background; the next save (step 15) throws on both ranks naming rank 1; step 5 stays the
// newest complete checkpoint, and a resumed run finishes exactly.
TEST_F(CheckpointProcess, AsyncFailedBackgroundWriteOnOneRankIsReportedAndThePreviousResumes) {
  const std::vector<std::string> flags = {"--steps", "24", "--every", "5", "--async", "--partial"};
  const std::string expected = reference(flags, "failing-reference");
  ASSERT_EQ(expected.size(), 64u);
  const std::string dir = freshDir("failing");
  const std::string obstacleDir = dir + "/ckpt/step-000000000010";
  const Result failed = run(mpiexec(2, workerArgs(dir, flags, {"--start-gate", dir + "/start"})), dir + "/first.txt",
                           [&](ChildProcess& job) {
    if (!waitForFile(dir + "/pids/rank-1.pid", job)) return;
    // The file exists before its line is written: wait (bounded) for the whole line.
    std::string pidLine = readWholeFile(dir + "/pids/rank-1.pid");
    for (int i = 0; i < 2000 && pidLine.find('\n') == std::string::npos; ++i) {
      std::this_thread::sleep_for(milliseconds(5));
      pidLine = readWholeFile(dir + "/pids/rank-1.pid");
    }
    const std::string pid = std::to_string(std::atol(pidLine.c_str()));
    fs::create_directories(obstacleDir + "/rank-00001.pt.tmp-" + pid);
    std::ofstream(dir + "/start") << "go\n";
  });
  ASSERT_FALSE(failed.timedOut) << failed.output;
  EXPECT_EQ(failed.code, 1) << failed.output;
  EXPECT_NE(failed.output.find("not published, the previous complete checkpoint stays the newest"), std::string::npos)
      << failed.output;
  // Both ranks throw at the step-15 save (mpirun may end the second before it prints).
  const bool rank0 = failed.output.find("train_worker: [r0/2] checkpoint " + obstacleDir) != std::string::npos;
  const bool rank1 = failed.output.find("train_worker: [r1/2] checkpoint " + obstacleDir) != std::string::npos;
  EXPECT_TRUE(rank0 || rank1) << failed.output;
  EXPECT_NE(failed.output.find("failed on rank 1: writing its shard"), std::string::npos) << failed.output;
  EXPECT_EQ(lastValueOf(failed.output, "saved", "step"), "10") << "nothing was taken after the failure";
  const auto newest = strata::checkpoint::findNewestComplete(dir + "/ckpt");
  ASSERT_TRUE(newest);
  EXPECT_EQ(newest->manifest.step, 5);

  fs::remove_all(obstacleDir);
  expectResumesExactly(dir, flags, "5", expected);
}

INSTANTIATE_TEST_SUITE_P(Checkpoint, CheckpointModes, ::testing::Values(false, true), modeName);

}  // namespace
