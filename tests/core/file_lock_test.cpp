// The exclusive file lock (src/core/file_lock.h): one holder at a time, the holder's line for
// whoever is refused, released when the holder goes (also when its process is SIGKILLed),
// and a clear "unavailable" where no file can be made.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/file_lock.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using Outcome = FileLock::Outcome;

class FileLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/strata_lock_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string text(const std::string& path) const {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string dir_;
};

TEST_F(FileLockTest, OneHolderAtATimeAndTheRefusedSeeItsLine) {
  const std::string path = dir_ + "/a/b/job.lock";  // parents created
  FileLock::Attempt first = FileLock::tryAcquire(path, "pid 1 on host h");
  ASSERT_EQ(first.outcome, Outcome::kAcquired) << first.detail;
  ASSERT_NE(first.lock, nullptr);
  EXPECT_EQ(first.lock->path(), path);
  EXPECT_EQ(text(path), "pid 1 on host h\n");

  // flock belongs to the open file: a second attempt of this very process is refused too.
  FileLock::Attempt second = FileLock::tryAcquire(path, "pid 2 on host h");
  EXPECT_EQ(second.outcome, Outcome::kHeld);
  EXPECT_EQ(second.lock, nullptr);
  EXPECT_EQ(second.detail, "pid 1 on host h");
  EXPECT_EQ(text(path), "pid 1 on host h\n");  // the refused one wrote nothing

  first.lock.reset();  // released; the file stays, the next holder replaces the line
  EXPECT_TRUE(fs::exists(path));
  FileLock::Attempt third = FileLock::tryAcquire(path, "pid 3");
  ASSERT_EQ(third.outcome, Outcome::kAcquired) << third.detail;
  EXPECT_EQ(text(path), "pid 3\n");
}

// A holder killed with SIGKILL leaves no stale lock: the kernel drops it with the process.
TEST_F(FileLockTest, AKilledHoldersLockIsFreeAtOnce) {
  const std::string path = dir_ + "/job.lock";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    FileLock::Attempt mine = FileLock::tryAcquire(path, "the child");
    const char byte = mine.outcome == Outcome::kAcquired ? 'y' : 'n';
    if (::write(ready[1], &byte, 1) != 1) ::_exit(2);
    ::pause();  // holds the lock until killed
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  EXPECT_EQ(byte, 'y');

  FileLock::Attempt whileAlive = FileLock::tryAcquire(path, "the parent");
  EXPECT_EQ(whileAlive.outcome, Outcome::kHeld);
  EXPECT_EQ(whileAlive.detail, "the child");

  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  FileLock::Attempt afterDeath = FileLock::tryAcquire(path, "the parent");
  EXPECT_EQ(afterDeath.outcome, Outcome::kAcquired) << afterDeath.detail;
}

TEST_F(FileLockTest, NoFileWhereAFileCannotBeIsUnavailableWithTheReason) {
  const std::string notADir = dir_ + "/plain";
  std::ofstream(notADir) << "x";
  FileLock::Attempt attempt = FileLock::tryAcquire(notADir + "/job.lock", "me");
  EXPECT_EQ(attempt.outcome, Outcome::kUnavailable);
  EXPECT_EQ(attempt.lock, nullptr);
  EXPECT_NE(attempt.detail.find(notADir), std::string::npos) << attempt.detail;
}

}  // namespace
}  // namespace strata
