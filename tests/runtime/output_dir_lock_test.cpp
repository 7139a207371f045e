// One job per output_dir (src/runtime/output_dir_lock.h): the holder's line and the refusal
// every rank of a second job raises. A real second job under mpirun: tests/launch/
// exit_status_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "runtime/output_dir_lock.h"

namespace strata::runtime {
namespace {

using Outcome = FileLock::Outcome;

TEST(OutputDirLock, TheHolderLineSaysWhoAndSinceWhenInUtc) {
  const auto since = std::chrono::system_clock::from_time_t(1795856701);  // 2026-11-28T09:05:01Z
  EXPECT_EQ(outputDirHolderLine(4242, "node-1", 2, since), "pid 4242 on host node-1, rank 0 of 2, since 2026-11-28T09:05:01Z");
}

TEST(OutputDirLock, TheLockFileIsHiddenInTheOutputDir) {
  EXPECT_EQ(outputDirLockPath("runs/job-1"), "runs/job-1/.strata-job.lock");
  EXPECT_EQ(outputDirLockPath("/tmp/run/"), "/tmp/run/.strata-job.lock");
}

TEST(OutputDirLock, AHeldDirectoryIsRefusedNamingTheKeyTheValueAndTheHolder) {
  const std::string refusal =
      outputDirLockRefusal("runs/job-1", Outcome::kHeld, "pid 4242 on host node-1, rank 0 of 2, since 2026-11-28T09:05:01Z");
  EXPECT_EQ(refusal,
            "output_dir \"runs/job-1\" is in use by another running job (the job of pid 4242 on host node-1, rank 0 "
            "of 2, since 2026-11-28T09:05:01Z, holding runs/job-1/.strata-job.lock): two jobs in one output_dir "
            "would mix their tensors, timelines and checkpoints. Give this job its own output_dir (config key "
            "output_dir), or start it once the other has ended");
  // A holder that has not written its line yet is still a holder.
  EXPECT_NE(outputDirLockRefusal("d", Outcome::kHeld, "").find("(a job that is still starting, holding d/"),
            std::string::npos);
}

TEST(OutputDirLock, ATakenOrUnavailableLockLetsTheJobGoOn) {
  EXPECT_EQ(outputDirLockRefusal("d", Outcome::kAcquired, ""), "");
  // No locks on this file system, or a directory that cannot be written: the job's writers
  // report the latter themselves; training is not stopped for it.
  EXPECT_EQ(outputDirLockRefusal("d", Outcome::kUnavailable, "cannot lock d/.strata-job.lock: No locks available"), "");
}

}  // namespace
}  // namespace strata::runtime
