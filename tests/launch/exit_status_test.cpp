// What a scheduler sees (docs/exit_status.md), for real: a 2-rank data-parallel job
// (checkpoint_train_worker) under Open MPI's mpirun, alone or under `strata run`, stopped
// with SIGUSR1 or SIGTERM, with a rank SIGKILLed, or with a bad config. Each job runs a few
// seconds; a job still running after kWallLimit is a hang and fails the test.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/catalog.h"
#include "strata/exit_codes.h"
#include "testing/child_process.h"
#include "testing/worker_driver.h"

namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using namespace strata::testing;  // ChildProcess, the worker paths, file helpers

constexpr milliseconds kWallLimit{90000};
constexpr milliseconds kStartLimit{40000};  // mpirun and libtorch start slowly on a loaded machine

class ExitStatus : public ::testing::Test {
 protected:
  void SetUp() override {
    allowMpiexecInContainers();
    dir_ = kRunRoot + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  // mpiexec -n 2 worker; a long, slow job unless `steps` says otherwise.
  std::vector<std::string> job(const std::vector<std::string>& extra = {}, int steps = 2000) const {
    std::vector<std::string> argv = {kMpiexec, "-n", "2", kTrainWorker, "--run-dir", dir_, "--steps",
                                     std::to_string(steps), "--every", "1000", "--sleep-ms", "10"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }
  std::vector<std::string> underStrataRun(int maxRestarts, const std::vector<std::string>& command) const {
    std::vector<std::string> argv = {kStrataCli, "run", "--max-restarts", std::to_string(maxRestarts),
                                     "--restart-delay-ms", "50", "--"};
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
  }
  // Waits until both ranks train (their pid files exist), then a little longer.
  void waitUntilTraining(ChildProcess& child) const {
    for (int rank = 0; rank < 2; ++rank)
      ASSERT_TRUE(waitForFile(pidFile(rank), child, kStartLimit)) << child.output();
    std::this_thread::sleep_for(milliseconds(300));
  }
  std::string pidFile(int rank) const { return dir_ + "/pids/rank-" + std::to_string(rank) + ".pid"; }
  void expectNewestCheckpointComplete() const {
    const auto entries = strata::checkpoint::listCheckpoints(dir_ + "/ckpt");
    ASSERT_FALSE(entries.empty()) << "no checkpoint written";
    const auto verdict = strata::checkpoint::verifyCheckpoint(entries.front().path);
    EXPECT_TRUE(verdict.complete) << entries.front().path << ": " << verdict.why;
  }
  // How a launcher (mpirun, or `strata run`) ended: its exit code (-1 after a hang) and output.
  struct Ended {
    int code = -1;
    std::string output;
  };
  // Starts `argv`, sends `signo` to the launcher itself once both ranks train, and waits for
  // its end.
  Ended signalledWhileTraining(const std::vector<std::string>& argv, int signo) {
    ChildProcess launcher(argv, dir_ + "/log.txt");
    waitUntilTraining(launcher);
    launcher.signal(signo);
    Ended ended;
    if (!launcher.wait(kWallLimit, &ended.code)) ADD_FAILURE() << "hang\n" << launcher.output();
    ended.output = launcher.output();
    return ended;
  }
  // A job of `steps` steps (--resume) under `strata run --max-restarts 1` whose rank 1 gets
  // `signo` once both ranks train: the job must be restarted and finish all its steps (exit
  // 0). Returns the whole output ("" after a hang).
  std::string restartedAfterSignalToRankOne(int signo, int steps) {
    ChildProcess run(underStrataRun(1, job({"--resume"}, steps)), dir_ + "/log.txt");
    waitUntilTraining(run);
    const pid_t rank1 = static_cast<pid_t>(std::atol(readWholeFile(pidFile(1)).c_str()));
    if (rank1 <= 0) {
      ADD_FAILURE() << "no pid of rank 1 in " << pidFile(1);
      return "";
    }
    ::kill(rank1, signo);
    int code = 0;
    if (!run.wait(kWallLimit, &code)) {
      ADD_FAILURE() << "hang\n" << run.output();
      return "";
    }
    const std::string out = run.output();
    EXPECT_EQ(code, 0) << out;
    EXPECT_EQ(lastValueOf(out, "final:", "step"), std::to_string(steps)) << out;
    return out;
  }
  std::string dir_;
};

TEST_F(ExitStatus, SigusrOneToMpirunStopsTheJobWithACheckpointAndExits75) {
  const Ended mpirun = signalledWhileTraining(job(), SIGUSR1);
  EXPECT_EQ(mpirun.code, strata::kExitStopped) << mpirun.output;
  const std::string step = lastValueOf(mpirun.output, "final:", "step");
  EXPECT_FALSE(step.empty()) << mpirun.output;
  EXPECT_EQ(lastValueOf(mpirun.output, "saved", "step"), step) << mpirun.output;
  expectNewestCheckpointComplete();
}

// Open MPI's own behaviour, documented in docs/exit_status.md: SIGTERM to mpirun aborts the
// job and mpirun exits 1 whatever the ranks did. (If this starts failing, Open MPI changed and
// the document must change with it.)
TEST_F(ExitStatus, SigtermToMpirunItselfExitsOne) {
  const Ended mpirun = signalledWhileTraining(job(), SIGTERM);
  EXPECT_EQ(mpirun.code, 1) << mpirun.output;
}

TEST_F(ExitStatus, SigtermToStrataRunBecomesAStopAndIsNotRestarted) {
  const Ended run = signalledWhileTraining(underStrataRun(3, job()), SIGTERM);
  const std::string& out = run.output;
  EXPECT_EQ(run.code, strata::kExitStopped) << out;
  EXPECT_NE(out.find("stopped after its checkpoint, as we were asked to"), std::string::npos) << out;
  EXPECT_EQ(out.find("attempt 2"), std::string::npos) << "restarted after a stop request\n" << out;
  expectNewestCheckpointComplete();
}

// A stop from outside (SIGTERM to one rank, as a node's reclaim does) is an interruption:
// `strata run` restarts the job, which resumes from the checkpoint and finishes.
TEST_F(ExitStatus, InterruptionFromOutsideIsRestartedAndResumes) {
  const std::string out = restartedAfterSignalToRankOne(SIGTERM, 60);
  EXPECT_NE(out.find("interrupted after its checkpoint; restart 1 of 1"), std::string::npos) << out;
  EXPECT_FALSE(lastValueOf(out, "resumed", "step").empty()) << out;
}

TEST_F(ExitStatus, KilledRankGives137AndIsRestarted) {
  const std::string out = restartedAfterSignalToRankOne(SIGKILL, 40);
  EXPECT_NE(out.find("exited with code 137; restart 1 of 1"), std::string::npos) << out;
}

TEST_F(ExitStatus, ConfigErrorExits78UnderMpirunAndIsNotRestarted) {
  ChildProcess mpirun(job({"--bad-config"}), dir_ + "/mpirun.txt");
  int code = 0;
  ASSERT_TRUE(mpirun.wait(kWallLimit, &code)) << "hang\n" << mpirun.output();
  EXPECT_EQ(code, strata::kExitConfigError) << mpirun.output();
  EXPECT_NE(mpirun.output().find("did you mean \"checkpoint\""), std::string::npos) << mpirun.output();

  ChildProcess run(underStrataRun(3, job({"--bad-config"})), dir_ + "/run.txt");
  ASSERT_TRUE(run.wait(kWallLimit, &code)) << "hang\n" << run.output();
  const std::string out = run.output();
  EXPECT_EQ(code, strata::kExitConfigError) << out;
  EXPECT_NE(out.find("configuration is invalid; not restarting"), std::string::npos) << out;
  EXPECT_EQ(out.find("attempt 2"), std::string::npos) << "a config error was retried\n" << out;
}

// One job per output_dir (src/runtime/output_dir_lock.h). A second job started on a running
// job's directory exits 78 on every rank, naming output_dir, its value and the running job's
// rank 0; the running job trains on. Once that job is gone, even SIGKILLed, a job on the same
// directory starts and finishes.
TEST_F(ExitStatus, ASecondJobOnARunningJobsOutputDirExits78AndTheFirstTrainsOn) {
  ChildProcess first(job(), dir_ + "/first.txt");
  waitUntilTraining(first);
  const std::string rank0 = std::to_string(std::atol(readWholeFile(pidFile(0)).c_str()));

  ChildProcess second(job({}, 20), dir_ + "/second.txt");
  int code = 0;
  ASSERT_TRUE(second.wait(kWallLimit, &code)) << "hang\n" << second.output();
  const std::string out = second.output();
  EXPECT_EQ(code, strata::kExitConfigError) << out;
  for (const std::string tag : {"[r0/2] ", "[r1/2] "}) {
    const std::string refusal = tag + "output_dir \"" + dir_ + "\" is in use by another running job (the job of pid " +
                                rank0 + " on host ";
    EXPECT_NE(out.find(refusal), std::string::npos) << "no \"" << refusal << "\" in\n" << out;
  }
  EXPECT_TRUE(first.running()) << first.output();
  EXPECT_EQ(readWholeFile(pidFile(0)), rank0 + "\n") << "the refused job wrote into the directory";

  ::kill(static_cast<pid_t>(std::atol(rank0.c_str())), SIGKILL);
  ASSERT_TRUE(first.wait(kWallLimit, &code)) << "hang\n" << first.output();
  ChildProcess third(job({}, 20), dir_ + "/third.txt");
  ASSERT_TRUE(third.wait(kWallLimit, &code)) << "hang\n" << third.output();
  EXPECT_EQ(code, 0) << third.output();
  EXPECT_EQ(lastValueOf(third.output(), "final:", "step"), "20") << third.output();
}

}  // namespace
