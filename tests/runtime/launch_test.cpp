#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

#include "core/affinity.h"
#include "core/errors.h"
#include "runtime/launch.h"
#include "testing/config_error.h"

namespace strata::runtime {
namespace {

std::string errorOf(const EnvMap& env) {
  return strata::testing::configErrorOf([&] { detectLaunch(env); });
}

TEST(Launch, NothingMeansSingleProcess) {
  const LaunchInfo l = detectLaunch({});
  EXPECT_EQ(l.kind, LaunchKind::kSingle);
  EXPECT_EQ(l.size, 1);
}

TEST(Launch, OpenMpiVariables) {
  const LaunchInfo l = detectLaunch({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "2"},
                                     {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  EXPECT_EQ(l.kind, LaunchKind::kMpi);
  EXPECT_EQ(l.rank, 2);
  EXPECT_EQ(l.size, 4);
  EXPECT_EQ(l.localRank, 0);
}

TEST(Launch, TorchrunVariables) {
  const LaunchInfo l = detectLaunch({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"},
                                     {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(l.kind, LaunchKind::kEnv);
  EXPECT_EQ(l.rank, 1);
  EXPECT_EQ(l.masterAddr, "10.0.0.1");
  EXPECT_EQ(l.masterPort, 29500);
}

TEST(Launch, InconsistentVariablesNameTheirValues) {
  EXPECT_NE(errorOf({{"RANK", "1"}}).find("needs both RANK and WORLD_SIZE, but got RANK=\"1\" WORLD_SIZE=\"\""),
            std::string::npos);
  EXPECT_NE(errorOf({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("RANK=2 must be below WORLD_SIZE=2"),
            std::string::npos);
  EXPECT_NE(errorOf({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK=\"x\" is not a non-negative integer"),
            std::string::npos);
  EXPECT_NE(errorOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}}).find("needs MASTER_ADDR and MASTER_PORT"),
            std::string::npos);
  EXPECT_NE(errorOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "70000"}})
                .find("MASTER_PORT=70000 is not a TCP port"),
            std::string::npos);
}

TEST(Launch, PretendHostsSplitEachRealHostIntoBlocks) {
  const std::vector<std::string> real{"a", "a", "a", "a", "b", "b"};
  EXPECT_EQ(pretendHosts(real, 1), real);
  EXPECT_EQ(pretendHosts(real, 2), (std::vector<std::string>{"a#0", "a#0", "a#1", "a#1", "b#0", "b#1"}));
}

TEST(Launch, IntraOpThreadsShareTheCoresUnlessOmpNumThreadsSaysOtherwise) {
  struct Case {
    EnvMap env;
    int hostCores, ownCores, localRanks, expected;
  };
  const Case cases[] = {
      {{}, 8, 8, 2, 4}, {{}, 2, 2, 1, 2}, {{}, 2, 2, 4, 1}, {{}, 3, 3, 2, 1}, {{}, 0, 0, 0, 1},
      // Bound by the launcher: mpirun -np 1 pins its rank to one core of two; a rank bound to
      // a 4-core socket of 8 with 2 ranks per host keeps its share (4); 4 ranks of 8 cores
      // bound to sockets get 2 each.
      {{}, 2, 1, 1, 1}, {{}, 8, 4, 2, 4}, {{}, 8, 4, 4, 2}, {{}, 2, 1, 2, 1},
      {{{"OMP_NUM_THREADS", "1"}}, 8, 8, 1, 1}, {{{"OMP_NUM_THREADS", "3"}}, 2, 2, 4, 3},
      {{{"OMP_NUM_THREADS", "4,2"}}, 2, 1, 1, 4}, {{{"OMP_NUM_THREADS", ""}}, 4, 4, 2, 2},
  };
  for (const Case& c : cases)
    EXPECT_EQ(intraOpThreads(c.env, c.hostCores, c.ownCores, c.localRanks), c.expected)
        << "host cores " << c.hostCores << ", own cores " << c.ownCores << ", local ranks " << c.localRanks;
  for (const char* bad : {"0", "x", ",2", "-1"}) {
    try {
      intraOpThreads({{"OMP_NUM_THREADS", bad}}, 2, 2, 1);
      ADD_FAILURE() << "OMP_NUM_THREADS=" << bad << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("OMP_NUM_THREADS=\"") + bad + "\""), std::string::npos)
          << e.what();
    }
  }
}

// ownCpuCount() counts the CPUs the caller may run on, as a launcher's binding leaves them.
TEST(Launch, AffinityCoresCountsTheCallersBinding) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  EXPECT_EQ(ownCpuCount(), CPU_COUNT(&mine));
  int cpu = 0;
  while (!CPU_ISSET(cpu, &mine)) ++cpu;
  int bound = -1;
  std::thread([&] {  // bind a thread of our own to one of our CPUs: the process keeps its set
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) == 0) bound = ownCpuCount();
  }).join();
  EXPECT_EQ(bound, 1);
  EXPECT_EQ(ownCpuCount(), CPU_COUNT(&mine));
}

}  // namespace
}  // namespace strata::runtime
