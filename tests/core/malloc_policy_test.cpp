// The malloc policy (core/malloc_policy.h): with "retain", a large block freed and allocated
// again is not faulted in again; with "system" (glibc's defaults) it is, every time. Each case
// runs in a forked child so the policies do not mix, and counts minor page faults (not time).
#include "core/malloc_policy.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "config/config.h"
#include "core/errors.h"

namespace strata {
namespace {

constexpr size_t kBlockBytes = size_t{64} << 20;  // a weight-gradient temporary's size

long minorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Touches every page of the block so that the compiler cannot drop the allocation (it
// removes a malloc/memset/free whose memory nobody reads).
void touch(char* block, char value) {
  std::memset(block, value, kBlockBytes);
  asm volatile("" : : "r"(block) : "memory");
}

// In a child: apply the policy, touch a 64 MiB block, free it, and count the faults of
// allocating and touching it a second time (what every training step after the first does).
long faultsOfTheSecondAllocation(MallocPolicy policy) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    applyMallocPolicy(policy);
    auto* first = static_cast<char*>(std::malloc(kBlockBytes));
    touch(first, 1);
    std::free(first);
    const long before = minorFaults();
    auto* second = static_cast<char*>(std::malloc(kBlockBytes));
    touch(second, 2);
    const long faults = minorFaults() - before;
    std::free(second);
    const bool written = write(fds[1], &faults, sizeof faults) == sizeof faults;
    _exit(written ? 0 : 1);
  }
  close(fds[1]);
  long faults = -1;
  const bool read = ::read(fds[0], &faults, sizeof faults) == sizeof faults;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return read && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? faults : -1;
}

TEST(MallocPolicy, RetainReusesAFreedLargeBlockWithoutFaultingItInAgain) {
  const long faults = faultsOfTheSecondAllocation(MallocPolicy::kRetain);
  ASSERT_GE(faults, 0);
  // 64 MiB is 16384 pages; a handful of faults may come from the allocator's own bookkeeping.
  EXPECT_LT(faults, 64) << "the freed block was given back to the kernel";
}

TEST(MallocPolicy, SystemFaultsAFreedLargeBlockInAgain) {
  // The reference: glibc's defaults unmap the block at free, so the next step faults it in
  // again (16384 faults with 4 KiB pages, 32 with transparent huge pages).
  const long faults = faultsOfTheSecondAllocation(MallocPolicy::kSystem);
  ASSERT_GE(faults, 0);
  EXPECT_GE(faults, 32);
}

TEST(MallocPolicy, ParsesTheConfigsValuesAndNamesTheFieldOtherwise) {
  EXPECT_EQ(parseMallocPolicy("retain", "memory.malloc"), MallocPolicy::kRetain);
  EXPECT_EQ(parseMallocPolicy("system", "memory.malloc"), MallocPolicy::kSystem);
  try {
    parseMallocPolicy("tcmalloc", "STRATA_MALLOC");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("STRATA_MALLOC"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tcmalloc"), std::string::npos) << e.what();
  }
}

TEST(MallocPolicy, TheUsersOwnMallocSettingsWinOverTheDefault) {
  EXPECT_TRUE(decideMallocPolicy(MallocPolicy::kRetain, false).apply);
  EXPECT_FALSE(decideMallocPolicy(MallocPolicy::kRetain, true).apply);
  EXPECT_NE(decideMallocPolicy(MallocPolicy::kRetain, true).reason.find("GLIBC_TUNABLES"), std::string::npos);
  EXPECT_FALSE(decideMallocPolicy(MallocPolicy::kSystem, false).apply);
}

// A fake environment for userTunedMalloc.
const char* gName = nullptr;
const char* gValue = nullptr;
const char* fakeGetenv(const char* name) { return gName != nullptr && std::strcmp(name, gName) == 0 ? gValue : nullptr; }
bool tunedWith(const char* name, const char* value) {
  gName = name;
  gValue = value;
  return userTunedMalloc(fakeGetenv);
}

TEST(MallocPolicy, SeesGlibcsMallocVariablesAndTunables) {
  EXPECT_FALSE(tunedWith(nullptr, nullptr));
  EXPECT_TRUE(tunedWith("MALLOC_TRIM_THRESHOLD_", "1000000"));
  EXPECT_TRUE(tunedWith("MALLOC_MMAP_MAX_", "0"));
  EXPECT_FALSE(tunedWith("MALLOC_MMAP_MAX_", ""));
  EXPECT_FALSE(tunedWith("MALLOC_ARENA_MAX", "2"));  // arenas are not what the policy sets
  EXPECT_TRUE(tunedWith("GLIBC_TUNABLES", "glibc.pthread.rseq=0:glibc.malloc.mmap_max=0"));
  EXPECT_FALSE(tunedWith("GLIBC_TUNABLES", "glibc.pthread.rseq=0"));
}

TEST(MallocPolicy, IsRetainByDefaultAndRoundTripsThroughTheConfig) {
  EXPECT_EQ(config::defaultJobConfig().memory.malloc, "retain");
  const config::JobConfig c = config::parseJobConfig(R"({"memory": {"malloc": "system"}})", "job.json");
  EXPECT_EQ(c.memory.malloc, "system");
  EXPECT_EQ(config::toJson(c)["memory"]["malloc"], "system");
  EXPECT_EQ(config::parseJobConfig(config::toJson(c).dump(), "again").memory.malloc, "system");
}

}  // namespace
}  // namespace strata
