// Fault tests with real processes: the driver launches strata_fault_worker ranks the way
// torchrun does (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or through mpiexec, kills
// some of them, withholds one, or feeds them a broken job config, and checks how every
// other rank ends: exit code, the error it printed (naming the culprit), and how long it
// took. Every run has a hard wall-clock limit: anything still running then is killed and
// the test fails as a hang. Each rank's stdout+stderr is kept under
// <build>/tests/process/runs/<test>/ and printed on failure.
#include "process_harness.h"

namespace {

using namespace process_testing;

// ---------------------------------------------------------------------------------------
// A healthy job completes: the harness and the launch work, so failures below are real.

TEST(HealthyJob, FourRanksCompleteAndAgree) {
  Job job(testDir());
  launchRanks(job, 4, {"--mode", "loop", "--iters", "200", "--count", "1000"},
              {"STRATA_TIMEOUT_MS=" + std::to_string(kLongTimeoutMs)});
  ASSERT_TRUE(job.waitAll()) << "hang\n" << job.report();
  for (size_t i = 0; i < job.size(); ++i) {
    EXPECT_TRUE(job[i].exitedWith(0)) << job[i].name << " " << job[i].how() << "\n" << job.report();
    EXPECT_NE(job[i].output().find("done iterations=200"), std::string::npos) << job.report();
  }
}

// ---------------------------------------------------------------------------------------
// 1. A peer dies by SIGKILL in the middle of a loop of allreduces.

struct KillCase {
  const char* name;
  int ranks;
  int victim;
  std::vector<std::string> env;
  std::vector<std::string> args = {"--count", "1000"};
};

void PrintTo(const KillCase& c, std::ostream* os) { *os << c.name; }

class PeerSigkill : public ::testing::TestWithParam<KillCase> {};

TEST_P(PeerSigkill, SurvivorsFailFastNamingTheDeadRank) {
  const KillCase& c = GetParam();
  Job job(testDir());
  const int killAt = 20;
  std::vector<std::string> args = {"--mode",   "loop", "--iters",   "1000000000",          "--seconds",
                                   "30",       "--victim", std::to_string(c.victim), "--kill-at", std::to_string(killAt)};
  args.insert(args.end(), c.args.begin(), c.args.end());
  launchRanks(job, c.ranks, args, with({"STRATA_TIMEOUT_MS=" + std::to_string(kLongTimeoutMs)}, c.env));
  const bool finished = job.waitAll();
  ASSERT_TRUE(finished) << "hang: still running after " << kWallLimit.count() << " ms\n" << job.report();
  const Proc& victim = job[static_cast<size_t>(c.victim)];
  ASSERT_NE(victim.output().find("victim: SIGKILL at iteration " + std::to_string(killAt)), std::string::npos)
      << job.report();
  expectSurvivorsFailedFast(job, static_cast<size_t>(c.victim), victim.end);
  if (HasFailure()) ADD_FAILURE() << job.report();
}

INSTANTIATE_TEST_SUITE_P(
    Transports, PeerSigkill,
    ::testing::Values(KillCase{"shm_4ranks", 4, 2, {"STRATA_TRANSPORT=shm"}},
                      KillCase{"shm_3ranks_rank0", 3, 0, {"STRATA_TRANSPORT=shm"}},
                      KillCase{"tcp_4ranks", 4, 1, {"STRATA_TRANSPORT=tcp"}},
                      KillCase{"tcp_3ranks", 3, 2, {"STRATA_TRANSPORT=tcp"}},
                      KillCase{"tcp_ring_4ranks",
                               4,
                               1,
                               {"STRATA_TRANSPORT=tcp", "STRATA_ALLREDUCE_ALGO=tcp_ring"}},
                      // Point-to-point ring exchanges (the pipeline's stage links): shared
                      // memory between ranks of one host, and TCP forced.
                      KillCase{"p2p_shm_2ranks", 2, 1, {}, {"--op", "p2p", "--count", "100000"}},
                      KillCase{"p2p_tcp_2ranks", 2, 1, {"STRATA_P2P_TRANSPORT=tcp"}, {"--op", "p2p", "--count", "100000"}},
                      // The zero-copy AllReduce over a shared buffer.
                      KillCase{"shm_direct_3ranks", 3, 1, {"STRATA_TRANSPORT=shm"}, {"--count", "100000", "--buffer", "shared"}},
                      KillCase{"hierarchical_direct_4ranks",
                               4,
                               2,
                               {"STRATA_HOSTS=2"},
                               {"--count", "100000", "--buffer", "shared"}}),
    [](const ::testing::TestParamInfo<KillCase>& info) { return std::string(info.param.name); });

uint64_t testSeed() {
  uint64_t seed = std::random_device{}();
  if (const char* s = std::getenv("STRATA_TEST_SEED")) seed = std::strtoull(s, nullptr, 10);
  std::cout << "seed " << seed << " (STRATA_TEST_SEED reproduces)" << std::endl;
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

// One run: `ranks` workers loop over allreduces (`args`, `env` added); after a random delay
// (< 400 ms) the driver SIGKILLs a random rank; every survivor must fail fast naming it.
void killRandomRankOnce(const std::string& dir, int ranks, const std::vector<std::string>& args,
                        const std::vector<std::string>& env, std::mt19937_64& rng) {
  const size_t victim = static_cast<size_t>(rng() % static_cast<uint64_t>(ranks));
  const int delayMs = static_cast<int>(rng() % 400);
  SCOPED_TRACE("victim " + std::to_string(victim) + " delay " + std::to_string(delayMs) + " ms");
  Job job(dir);
  std::vector<std::string> argv = {"--mode", "loop", "--iters", "1000000000", "--seconds", "30"};
  argv.insert(argv.end(), args.begin(), args.end());
  launchRanks(job, ranks, argv, with({"STRATA_TIMEOUT_MS=" + std::to_string(kLongTimeoutMs)}, env));
  const bool ready = job.waitUntil([&] { return allReady(job) || job.allEnded(); });
  ASSERT_TRUE(ready && allReady(job)) << "the ranks did not all start\n" << job.report();
  std::this_thread::sleep_for(milliseconds(delayMs));
  job.poll();
  ASSERT_FALSE(job[victim].ended) << "the loop ended early\n" << job.report();
  job.kill(victim, SIGKILL);
  const auto death = Clock::now();
  const bool finished = job.waitAll();
  ASSERT_TRUE(finished) << "hang after killing rank " << victim << "\n" << job.report();
  expectSurvivorsFailedFast(job, victim, death);
  if (::testing::Test::HasFailure()) FAIL() << job.report();
}

// The driver kills a random rank at a random moment of the loop, five times over: no
// run may hang, every survivor fails fast naming the dead rank.
TEST(ExternalSigkill, RandomRankAtRandomMomentNeverHangs) {
  const uint64_t seed = testSeed();
  std::mt19937_64 rng(seed);
  for (int run = 0; run < 5; ++run) {
    const bool tcp = run % 2 == 1;
    SCOPED_TRACE("run " + std::to_string(run) + (tcp ? " tcp" : " shm") + ", seed " + std::to_string(seed));
    killRandomRankOnce(testDir("/run" + std::to_string(run)), tcp ? 3 : 4, {"--count", "1000"},
                       {std::string("STRATA_TRANSPORT=") + (tcp ? "tcp" : "shm")}, rng);
    if (HasFatalFailure()) return;
  }
}

// The same inside the zero-copy AllReduce: 16 MB per call, so the kill lands mid-reduction.
TEST(ExternalSigkill, SharedBufferMidReductionNeverHangs) {
  const uint64_t seed = testSeed();
  std::mt19937_64 rng(seed);
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE("run " + std::to_string(run) + ", seed " + std::to_string(seed));
    killRandomRankOnce(testDir("/run" + std::to_string(run)), 3, {"--count", "4000000", "--buffer", "shared"},
                       {"STRATA_TRANSPORT=shm", "STRATA_ALLREDUCE_ALGO=shm_direct"}, rng);
    if (HasFatalFailure()) return;
  }
}

// ---------------------------------------------------------------------------------------
// 2. A rank that never arrives at the collective.

struct AbsentCase {
  const char* name;
  const char* how;  // sleep: alive but elsewhere; exit: gone
  const char* transport;
};

void PrintTo(const AbsentCase& c, std::ostream* os) { *os << c.name; }

class AbsentRank : public ::testing::TestWithParam<AbsentCase> {};

TEST_P(AbsentRank, OthersFailNamingIt) {
  const AbsentCase& c = GetParam();
  const bool sleeps = std::string(c.how) == "sleep";
  constexpr int kTimeoutMs = 1000;
  constexpr int kRanks = 3;
  constexpr size_t kAbsent = 2;
  Job job(testDir());
  launchRanks(job, kRanks,
              {"--mode", "absent", "--absent", std::to_string(kAbsent), "--absent-how", c.how, "--sleep-ms", "8000"},
              {"STRATA_TIMEOUT_MS=" + std::to_string(kTimeoutMs), std::string("STRATA_TRANSPORT=") + c.transport});
  auto othersEnded = [&] {
    for (size_t i = 0; i < job.size(); ++i)
      if (i != kAbsent && !job[i].ended) return false;
    return true;
  };
  const bool finished = job.waitUntil(othersEnded);
  const bool absentStillSleeping = !job[kAbsent].ended;
  job.killAll();  // the sleeper
  ASSERT_TRUE(finished) << "hang: ranks waiting for the absent rank " << kAbsent << " did not give up\n"
                        << job.report();
  ASSERT_TRUE(allReady(job)) << "init failed\n" << job.report();
  if (sleeps) {
    EXPECT_TRUE(absentStillSleeping) << "the sleeping rank ended early: " << job[kAbsent].how();
  } else {
    EXPECT_TRUE(job[kAbsent].exitedWith(0)) << job[kAbsent].how();
  }
  int timeoutErrors = 0;
  for (size_t i = 0; i < job.size(); ++i) {
    if (i == kAbsent) continue;
    const Proc& p = job[i];
    const std::string out = p.output();
    const std::string error = errorLine(out);
    SCOPED_TRACE(p.name + ": " + error);
    const long ms = failedAfterMs(out);
    EXPECT_TRUE(namesRank(error, static_cast<int>(kAbsent))) << p.name << "'s error does not name rank " << kAbsent;
    EXPECT_GE(ms, 0) << "no failed-after-ms line";
    EXPECT_LT(ms, kTimeoutMs + 4000);
    if (sleeps) {
      // Alive but elsewhere: only the timeout can tell, so not before it.
      EXPECT_TRUE(p.exitedWith(4) || p.exitedWith(3)) << p.how();
      EXPECT_GE(ms, kTimeoutMs - 50) << "failed before STRATA_TIMEOUT_MS";
      EXPECT_TRUE(error.find("did not arrive within 1000 ms") != std::string::npos ||
                  error.find("timed out after 1000 ms") != std::string::npos)
          << "the error should say the rank did not arrive in time";
      if (p.exitedWith(4)) ++timeoutErrors;
      EXPECT_TRUE(p.exitedWith(4)) << "every waiting rank should see a TimeoutError, " << p.name << " " << p.how();
    } else {
      // Gone: the dead process is noticed (peer pid probe, connection closed) or, at
      // the latest, the timeout fires.
      EXPECT_TRUE(p.exitedWith(3) || p.exitedWith(4)) << p.how();
    }
  }
  if (sleeps) {
    EXPECT_GE(timeoutErrors, 1) << "no rank reported a TimeoutError";
  }
  if (HasFailure()) ADD_FAILURE() << job.report();
}

INSTANTIATE_TEST_SUITE_P(Ways, AbsentRank,
                         ::testing::Values(AbsentCase{"sleeps_shm", "sleep", "shm"},
                                           AbsentCase{"sleeps_tcp", "sleep", "tcp"},
                                           AbsentCase{"exits_shm", "exit", "shm"},
                                           AbsentCase{"exits_tcp", "exit", "tcp"}),
                         [](const ::testing::TestParamInfo<AbsentCase>& info) { return std::string(info.param.name); });

}  // namespace
