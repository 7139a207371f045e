// The process tests' harness: spawning ranks (torchrun-style variables or mpiexec) with a
// wall-clock limit, their logs, and the checks shared by the fault and config/secret tests.
#pragma once
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

namespace process_testing {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline constexpr const char* kWorker = STRATA_FAULT_WORKER;
inline constexpr const char* kMpiexec = STRATA_MPIEXEC;
inline constexpr const char* kRunDir = STRATA_PROCESS_RUN_DIR;

// Collectives' timeout in the fault tests: long, so that a fast failure cannot be the
// timeout's doing.
inline constexpr int kLongTimeoutMs = 20000;
// How soon after a peer's death every survivor must have exited.
inline constexpr milliseconds kFailFast{5000};
// Hard limit per run; well below kLongTimeoutMs, so a run that only ends by the timeout
// counts as a hang.
inline constexpr milliseconds kWallLimit{15000};

inline std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline void writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

inline double msBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// A TCP port nobody listens on right now: bind port 0, read it back, close.
inline int freePort() {
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
inline std::vector<std::string> cleanEnvironment() {
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

inline std::string testDir(const std::string& suffix = "") {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name() + suffix;
  std::replace(name.begin(), name.end(), '/', '_');
  return std::string(kRunDir) + "/" + name;
}

inline std::vector<std::string> with(std::vector<std::string> env, const std::vector<std::string>& extra) {
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

// torchrun's variables for one rank, and a job secret (a torchrun-style launch without one is
// refused: docs/security.md) unless `extra` sets STRATA_JOB_SECRET or STRATA_JOB_SECRET_FILE.
inline std::vector<std::string> rankEnv(int rank, int size, int port, const std::vector<std::string>& extra) {
  std::vector<std::string> vars = {"RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(size),
                                   "LOCAL_RANK=" + std::to_string(rank), "MASTER_ADDR=127.0.0.1",
                                   "MASTER_PORT=" + std::to_string(port)};
  bool ownSecret = false;
  for (const std::string& kv : extra) ownSecret = ownSecret || kv.rfind("STRATA_JOB_SECRET", 0) == 0;
  if (!ownSecret) vars.push_back("STRATA_JOB_SECRET=process-test-" + std::to_string(port) + "-0123456789abcdef0123");
  return with(cleanEnvironment(), with(vars, extra));
}

// Starts `size` workers with the same arguments.
inline void launchRanks(Job& job, int size, const std::vector<std::string>& args, const std::vector<std::string>& extraEnv) {
  const int port = freePort();
  ASSERT_GT(port, 0) << "no free port";
  for (int r = 0; r < size; ++r) {
    std::vector<std::string> argv = {kWorker};
    argv.insert(argv.end(), args.begin(), args.end());
    job.spawn("rank" + std::to_string(r), argv, rankEnv(r, size, port, extraEnv));
  }
}

inline bool allReady(Job& job) {
  for (size_t i = 0; i < job.size(); ++i)
    if (job[i].output().find("ready rank=") == std::string::npos) return false;
  return true;
}

// "rank 2" as a whole word: not "rank 20", not "[r2/4]".
inline bool namesRank(const std::string& text, int rank) {
  return std::regex_search(text, std::regex("rank " + std::to_string(rank) + "([^0-9]|$)"));
}

inline std::string errorLine(const std::string& output) {
  const size_t at = output.find("error: ");
  if (at == std::string::npos) return "";
  return output.substr(at, output.find('\n', at) - at);
}

inline long failedAfterMs(const std::string& output) {
  std::smatch m;
  if (std::regex_search(output, m, std::regex("failed-after-ms: (-?[0-9]+)"))) return std::stol(m[1]);
  return -1;
}


// Checks a run in which `victim` died (at `death`): it was SIGKILLed, and every other
// rank exited with NetworkError's code, naming the victim, soon after.
inline void expectSurvivorsFailedFast(Job& job, size_t victim, Clock::time_point death, bool requireNaming = true) {
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

}  // namespace process_testing
