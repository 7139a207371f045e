// Fault tests with real processes: the driver launches strata_fault_worker ranks the way
// torchrun does (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or through mpiexec, kills
// some of them, withholds one, or feeds them a broken job config, and checks how every
// other rank ends: exit code, the error it printed (naming the culprit), and how long it
// took. Every run has a hard wall-clock limit: anything still running then is killed and
// the test fails as a hang. Each rank's stdout+stderr is kept under
// <build>/tests/process/runs/<test>/ and printed on failure.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kWorker = STRATA_FAULT_WORKER;
constexpr const char* kMpiexec = STRATA_MPIEXEC;
constexpr const char* kRunDir = STRATA_PROCESS_RUN_DIR;

// Collectives' timeout in the fault tests: long, so that a fast failure cannot be the
// timeout's doing.
constexpr int kLongTimeoutMs = 20000;
// How soon after a peer's death every survivor must have exited.
constexpr milliseconds kFailFast{5000};
// Hard limit per run; well below kLongTimeoutMs, so a run that only ends by the timeout
// counts as a hang.
constexpr milliseconds kWallLimit{15000};

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

double msBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// A TCP port nobody listens on right now: bind port 0, read it back, close.
int freePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// The driver's environment without anything a launcher or Strata reads, so that the
// variables each test sets are the only ones in force.
std::vector<std::string> cleanEnvironment() {
  static const char* kDropExact[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                                     "MASTER_ADDR", "MASTER_PORT"};
  static const char* kDropPrefix[] = {"STRATA_", "OMPI_", "PMIX_", "PMI_"};
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    bool drop = false;
    for (const char* n : kDropExact) drop = drop || name == n;
    for (const char* p : kDropPrefix) drop = drop || name.rfind(p, 0) == 0;
    if (!drop) env.push_back(kv);
  }
  return env;
}

// One spawned process and how it ended.
struct Proc {
  std::string name;
  pid_t pid = -1;
  std::string log;
  bool ended = false;
  int status = 0;
  Clock::time_point end;
  bool killedByDriver = false;

  bool exitedWith(int code) const { return ended && WIFEXITED(status) && WEXITSTATUS(status) == code; }
  bool exitedNonZero() const { return ended && WIFEXITED(status) && WEXITSTATUS(status) != 0; }
  bool killedBy(int sig) const { return ended && WIFSIGNALED(status) && WTERMSIG(status) == sig; }
  std::string output() const { return readFile(log); }
  std::string how() const {
    if (!ended) return "still running";
    if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return std::string("killed by signal ") + std::to_string(WTERMSIG(status)) +
                                    (killedByDriver ? " (sent by the driver)" : "");
    return "status " + std::to_string(status);
  }
};

// A set of processes started together, with a wall-clock limit.
class Job {
 public:
  explicit Job(const std::string& dir) : dir_(dir), start_(Clock::now()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    fs::create_directories(dir_, ec);
  }
  ~Job() {
    killAll();  // nothing outlives its test
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Starts argv[0] with `env`, stdout and stderr to <dir>/<name>.log. ownGroup: in a new
  // process group, so killAll reaches its children too (mpiexec's ranks).
  Proc& spawn(const std::string& name, const std::vector<std::string>& argv, const std::vector<std::string>& env,
              bool ownGroup = false) {
    procs_.push_back(Proc{});
    Proc& p = procs_.back();
    p.name = name;
    p.log = dir_ + "/" + name + ".log";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, p.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGTERM);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (ownGroup) {
      flags |= POSIX_SPAWN_SETPGROUP;
      posix_spawnattr_setpgroup(&attr, 0);
    }
    posix_spawnattr_setflags(&attr, flags);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    std::vector<char*> args, envp;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    const int rc = posix_spawn(&p.pid, argv[0].c_str(), &actions, &attr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
      ADD_FAILURE() << "posix_spawn(" << argv[0] << ") failed: " << std::strerror(rc);
      p.pid = -1;
      p.ended = true;
      p.end = Clock::now();
    }
    groups_.push_back(ownGroup);
    return p;
  }

  Proc& operator[](size_t i) { return procs_.at(i); }
  size_t size() const { return procs_.size(); }
  Clock::time_point start() const { return start_; }

  // Reaps whatever ended since the last call.
  void poll() {
    for (Proc& p : procs_) {
      if (p.ended || p.pid <= 0) continue;
      int status = 0;
      const pid_t r = waitpid(p.pid, &status, WNOHANG);
      if (r == p.pid) {
        p.ended = true;
        p.status = status;
        p.end = Clock::now();
      }
    }
  }

  // Polls until `done()` holds or `limit` (from the job's start) passes. False on timeout.
  bool waitUntil(const std::function<bool()>& done, milliseconds limit = kWallLimit) {
    const auto deadline = start_ + limit;
    for (;;) {
      poll();
      if (done()) return true;
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(milliseconds(2));
    }
  }

  // Waits for every process; on the limit, kills the rest and returns false (a hang).
  bool waitAll(milliseconds limit = kWallLimit) {
    const bool ok = waitUntil([&] { return allEnded(); }, limit);
    if (!ok) {
      for (const Proc& p : procs_)
        if (!p.ended) hung_.push_back(p.name);
      killAll();
    }
    return ok;
  }

  bool allEnded() const {
    return std::all_of(procs_.begin(), procs_.end(), [](const Proc& p) { return p.ended; });
  }

  void kill(size_t i, int sig = SIGKILL) {
    Proc& p = procs_.at(i);
    if (p.ended || p.pid <= 0) return;
    p.killedByDriver = true;
    ::kill(groups_.at(i) ? -p.pid : p.pid, sig);
  }

  // SIGKILL to everything still running, then reap it.
  void killAll() {
    poll();
    for (size_t i = 0; i < procs_.size(); ++i) kill(i, SIGKILL);
    for (Proc& p : procs_) {
      if (p.ended || p.pid <= 0) continue;
      int status = 0;
      while (waitpid(p.pid, &status, 0) < 0 && errno == EINTR) {
      }
      p.ended = true;
      p.status = status;
      p.end = Clock::now();
    }
  }

  const std::vector<std::string>& hung() const { return hung_; }

  // Every process: how it ended, when, and its output.
  std::string report() const {
    std::ostringstream out;
    for (const Proc& p : procs_) {
      out << "---- " << p.name << " (pid " << p.pid << "): " << p.how();
      if (p.ended) out << " at +" << static_cast<long>(msBetween(start_, p.end)) << " ms";
      out << ", log " << p.log << "\n" << p.output();
    }
    return out.str();
  }

 private:
  std::string dir_;
  Clock::time_point start_;
  std::deque<Proc> procs_;  // stable references
  std::vector<bool> groups_;
  std::vector<std::string> hung_;
};

std::string testDir(const std::string& suffix = "") {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name() + suffix;
  std::replace(name.begin(), name.end(), '/', '_');
  return std::string(kRunDir) + "/" + name;
}

std::vector<std::string> with(std::vector<std::string> env, const std::vector<std::string>& extra) {
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

// torchrun's variables for one rank.
std::vector<std::string> rankEnv(int rank, int size, int port, const std::vector<std::string>& extra) {
  return with(cleanEnvironment(), with({"RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(size),
                                        "LOCAL_RANK=" + std::to_string(rank), "MASTER_ADDR=127.0.0.1",
                                        "MASTER_PORT=" + std::to_string(port)},
                                       extra));
}

// Starts `size` workers with the same arguments.
void launchRanks(Job& job, int size, const std::vector<std::string>& args, const std::vector<std::string>& extraEnv) {
  const int port = freePort();
  ASSERT_GT(port, 0) << "no free port";
  for (int r = 0; r < size; ++r) {
    std::vector<std::string> argv = {kWorker};
    argv.insert(argv.end(), args.begin(), args.end());
    job.spawn("rank" + std::to_string(r), argv, rankEnv(r, size, port, extraEnv));
  }
}

bool allReady(Job& job) {
  for (size_t i = 0; i < job.size(); ++i)
    if (job[i].output().find("ready rank=") == std::string::npos) return false;
  return true;
}

// "rank 2" as a whole word: not "rank 20", not "[r2/4]".
bool namesRank(const std::string& text, int rank) {
  return std::regex_search(text, std::regex("rank " + std::to_string(rank) + "([^0-9]|$)"));
}

std::string errorLine(const std::string& output) {
  const size_t at = output.find("error: ");
  if (at == std::string::npos) return "";
  return output.substr(at, output.find('\n', at) - at);
}

long failedAfterMs(const std::string& output) {
  std::smatch m;
  if (std::regex_search(output, m, std::regex("failed-after-ms: (-?[0-9]+)"))) return std::stol(m[1]);
  return -1;
}


// Checks a run in which `victim` died (at `death`): it was SIGKILLed, and every other
// rank exited with NetworkError's code, naming the victim, soon after.
void expectSurvivorsFailedFast(Job& job, size_t victim, Clock::time_point death, bool requireNaming = true) {
  EXPECT_TRUE(job[victim].killedBy(SIGKILL)) << job[victim].name << " " << job[victim].how();
  for (size_t i = 0; i < job.size(); ++i) {
    if (i == victim) continue;
    const Proc& p = job[i];
    const std::string out = p.output();
    SCOPED_TRACE(p.name + ": " + errorLine(out));
    EXPECT_TRUE(p.exitedWith(3)) << p.name << " should fail with a NetworkError (exit 3), but " << p.how();
    EXPECT_NE(out.find("error-type: NetworkError"), std::string::npos);
    if (requireNaming) {
      EXPECT_TRUE(namesRank(errorLine(out), static_cast<int>(victim)))
          << p.name << "'s error does not name the dead rank " << victim;
    }
    EXPECT_LT(msBetween(death, p.end), kFailFast.count())
        << p.name << " took " << msBetween(death, p.end) << " ms to exit after rank " << victim
        << " died (STRATA_TIMEOUT_MS=" << kLongTimeoutMs << ")";
  }
}

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

// ---------------------------------------------------------------------------------------
// 3. A broken job config: every rank reports it, with its rank tag, and exits non-zero;
// nobody waits for anybody.

struct ConfigCase {
  const char* name;
  const char* json;      // nullptr: the file does not exist
  bool viaEnvironment;   // STRATA_CONFIG instead of --config
  const char* expected;  // the message after "[rK/2] "; {path} is the config file's path
};

std::string expand(std::string text, const std::string& path) {
  const std::string key = "{path}";
  for (size_t at; (at = text.find(key)) != std::string::npos;) text.replace(at, key.size(), path);
  return text;
}

void PrintTo(const ConfigCase& c, std::ostream* os) { *os << c.name; }

class BadJobConfig : public ::testing::TestWithParam<ConfigCase> {};

TEST_P(BadJobConfig, EveryRankReportsItAndExits) {
  const ConfigCase& c = GetParam();
  const std::string dir = testDir();
  Job job(dir);
  const std::string path = dir + "/job.json";
  if (c.json) writeFile(path, c.json);
  std::vector<std::string> args = {"--mode", "init"};
  std::vector<std::string> env = {"STRATA_TIMEOUT_MS=" + std::to_string(kLongTimeoutMs)};
  if (c.viaEnvironment) {
    env.push_back("STRATA_CONFIG=" + path);
  } else {
    args.insert(args.end(), {"--config", path});
  }
  launchRanks(job, 2, args, env);
  ASSERT_TRUE(job.waitAll(milliseconds(10000))) << "hang on a config error\n" << job.report();
  const std::string message = expand(c.expected, path);
  for (int r = 0; r < 2; ++r) {
    const Proc& p = job[static_cast<size_t>(r)];
    const std::string out = p.output();
    const std::string tag = "[r" + std::to_string(r) + "/2]";
    EXPECT_TRUE(p.exitedWith(2)) << p.name << " " << p.how() << "\n" << out;
    EXPECT_NE(out.find("error: " + tag + " " + message), std::string::npos)
        << p.name << " should print \"error: " << tag << " " << message << "\", printed:\n"
        << out;
    EXPECT_NE(out.find("error-type: ConfigError"), std::string::npos) << out;
    EXPECT_EQ(out.find("ready rank="), std::string::npos) << "init succeeded on a bad config:\n" << out;
    // Neither rank waited for the other (no rendezvous before the config is checked).
    EXPECT_LT(msBetween(job.start(), p.end), 5000) << p.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadJobConfig,
    ::testing::Values(
        ConfigCase{"UnknownKey", R"({"modelparalel": {}})", false,
                   R"({path}: unknown key "modelparalel" at /modelparalel; did you mean "modelparallel"?)"},
        ConfigCase{"WrongType", R"({"modelparallel": {"partitions": "two"}})", false,
                   R"({path}: /modelparallel/partitions: expected an integer >= 1, got "two")"},
        ConfigCase{"OutOfRange", R"({"dataparallel": {"bucket_cap_mb": -1}})", false,
                   R"({path}: /dataparallel/bucket_cap_mb: expected a number in (0, 65536], got -1)"},
        ConfigCase{"BadJson", R"({"output_dir": })", false, R"({path}:1:16 (byte 16): invalid JSON: syntax error)"},
        ConfigCase{"PartitionsDoNotDivideWorld", R"({"modelparallel": {"enabled": true, "partitions": 3}})", false,
                   R"({path}: /modelparallel/partitions: 3 does not divide the world size 2)"},
        ConfigCase{"MissingFileFromEnvironment", nullptr, true,
                   R"(cannot read config file "{path}" (from STRATA_CONFIG): No such file or directory)"},
        ConfigCase{"MissingFileFromFlag", nullptr, false,
                   R"(cannot read config file "{path}" (from --config): No such file or directory)"}),
    [](const ::testing::TestParamInfo<ConfigCase>& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------
// 4. The same under a real mpiexec.

std::vector<std::string> mpiexecArgs(int ranks, const std::vector<std::string>& workerArgs) {
  std::vector<std::string> argv = {kMpiexec, "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(ranks),
                                   kWorker};
  argv.insert(argv.end(), workerArgs.begin(), workerArgs.end());
  return argv;
}

std::vector<std::string> mpiexecEnv() {
  return with(cleanEnvironment(), {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                                   "OMPI_MCA_rmaps_base_oversubscribe=1",
                                   "STRATA_TIMEOUT_MS=" + std::to_string(kLongTimeoutMs)});
}

TEST(Mpiexec, HealthyJobCompletes) {
  if (std::string(kMpiexec).empty()) GTEST_SKIP() << "built without MPI";
  Job job(testDir());
  job.spawn("mpiexec", mpiexecArgs(2, {"--mode", "loop", "--iters", "50"}), mpiexecEnv(), /*ownGroup=*/true);
  ASSERT_TRUE(job.waitAll(milliseconds(30000))) << "hang\n" << job.report();
  EXPECT_TRUE(job[0].exitedWith(0)) << job.report();
  const std::string out = job[0].output();
  EXPECT_NE(out.find("ready rank=0 size=2"), std::string::npos) << out;
  EXPECT_NE(out.find("ready rank=1 size=2"), std::string::npos) << out;
}

TEST(Mpiexec, BadConfigFailsOnBothRanks) {
  if (std::string(kMpiexec).empty()) GTEST_SKIP() << "built without MPI";
  const std::string dir = testDir();
  Job job(dir);
  const std::string path = dir + "/bad.json";
  writeFile(path, R"({"modelparalel": {}})");
  job.spawn("mpiexec", mpiexecArgs(2, {"--mode", "init", "--config", path}), mpiexecEnv(), /*ownGroup=*/true);
  ASSERT_TRUE(job.waitAll(milliseconds(30000))) << "hang\n" << job.report();
  EXPECT_TRUE(job[0].exitedNonZero()) << job[0].how() << "\n" << job.report();
  const std::string out = job[0].output();
  const std::string message = path + R"(: unknown key "modelparalel" at /modelparalel; did you mean "modelparallel"?)";
  for (int r = 0; r < 2; ++r) {
    const std::string line = "error: [r" + std::to_string(r) + "/2] " + message;
    EXPECT_NE(out.find(line), std::string::npos) << "missing \"" << line << "\" in:\n" << out;
  }
  EXPECT_EQ(out.find("ready rank="), std::string::npos) << out;
}

// ---------------------------------------------------------------------------------------
// 5. The job secret (docs/security.md): a rank with another secret is refused by the store
// and the job ends on every rank, naming why; a network store without a secret is refused.

TEST(JobSecret, WrongSecretIsRefusedAndEveryRankEnds) {
  Job job(testDir());
  const int port = freePort();
  ASSERT_GT(port, 0);
  for (int r = 0; r < 2; ++r) {
    job.spawn("rank" + std::to_string(r), {kWorker, "--mode", "init"},
              rankEnv(r, 2, port, {"STRATA_TIMEOUT_MS=4000", r == 0 ? "STRATA_JOB_SECRET=alpha" : "STRATA_JOB_SECRET=beta"}));
  }
  ASSERT_TRUE(job.waitAll(milliseconds(30000))) << "hang on a wrong secret\n" << job.report();
  // Rank 1 is refused at once: a config error naming the store and the secret settings.
  const std::string refused = job[1].output();
  EXPECT_TRUE(job[1].exitedWith(2)) << job.report();
  EXPECT_NE(refused.find("error-type: ConfigError"), std::string::npos) << refused;
  EXPECT_NE(refused.find("127.0.0.1:" + std::to_string(port) + ": the server refused our proof of the job secret"),
            std::string::npos)
      << refused;
  EXPECT_LT(msBetween(job.start(), job[1].end), 3500) << "the refusal waited for a timeout";
  // Rank 0 (the store) gives up at its timeout, quoting the refusal of rank 1.
  const std::string waited = job[0].output();
  EXPECT_TRUE(job[0].exitedNonZero()) << job.report();
  EXPECT_NE(waited.find("rank 1 did not join the job"), std::string::npos) << waited;
  EXPECT_NE(waited.find("the store refused: 127.0.0.1:"), std::string::npos) << waited;
  EXPECT_NE(waited.find("claiming rank 1: wrong job secret"), std::string::npos) << waited;
}

TEST(JobSecret, NetworkStoreWithoutASecretIsRefusedBeforeAnyConnection) {
  Job job(testDir());
  // A name that never resolves (RFC 2606): the check comes before any lookup or connection.
  for (int r = 0; r < 2; ++r) {
    job.spawn("rank" + std::to_string(r), {kWorker, "--mode", "init"},
              with(cleanEnvironment(), {"RANK=" + std::to_string(r), "WORLD_SIZE=2", "MASTER_ADDR=store.strata.invalid",
                                        "MASTER_PORT=29500"}));
  }
  ASSERT_TRUE(job.waitAll(milliseconds(20000))) << "hang\n" << job.report();
  for (int r = 0; r < 2; ++r) {
    const std::string out = job[static_cast<size_t>(r)].output();
    EXPECT_TRUE(job[static_cast<size_t>(r)].exitedWith(2)) << job.report();
    EXPECT_NE(out.find("error-type: ConfigError"), std::string::npos) << out;
    EXPECT_NE(out.find("reachable over the network but the job has no secret"), std::string::npos) << out;
    EXPECT_NE(out.find("STRATA_JOB_SECRET"), std::string::npos) << out;
  }
}

TEST(JobSecret, MpiexecWithAWrongSecretOnOneRankEndsTheJob) {
  if (std::string(kMpiexec).empty()) GTEST_SKIP() << "built without MPI";
  Job job(testDir());
  std::vector<std::string> argv = {kMpiexec, "--allow-run-as-root", "--oversubscribe", "-np", "1", "-x",
                                   "STRATA_JOB_SECRET=alpha", kWorker, "--mode", "init", ":", "-np", "1", "-x",
                                   "STRATA_JOB_SECRET=beta", kWorker, "--mode", "init"};
  job.spawn("mpiexec", argv, mpiexecEnv(), /*ownGroup=*/true);
  ASSERT_TRUE(job.waitAll(milliseconds(30000))) << "hang\n" << job.report();
  EXPECT_TRUE(job[0].exitedNonZero()) << job.report();
  const std::string out = job[0].output();
  EXPECT_NE(out.find("error: [r1/2] TcpStore 127.0.0.1:"), std::string::npos) << out;
  EXPECT_NE(out.find("the server refused our proof of the job secret: wrong job secret"), std::string::npos) << out;
  EXPECT_EQ(out.find("ready rank="), std::string::npos) << out;
  EXPECT_LT(msBetween(job.start(), job[0].end), static_cast<double>(kLongTimeoutMs)) << "ended only at a timeout";
}

}  // namespace
