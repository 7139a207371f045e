// strata_fault_worker: one rank of a real multi-process job, driven by process_test
// (tests/process/process_test.cpp) or by mpiexec. It initialises Strata from its
// launcher's environment (torchrun-style RANK/WORLD_SIZE/MASTER_* or mpirun) and the
// job config (--config FILE / STRATA_CONFIG), runs a scenario, and reports through
// its exit code and one line per event on stdout:
//
//   ready rank=R size=N pid=P                 after strata::init
//   done iterations=K                         the scenario finished
//   error: <what()>                           a strata::Error ended it
//   error-type: ConfigError|...               the dynamic type of that error
//   failed-after-ms: T iteration=I            time spent inside the failing collective
//
// Exit codes: 0 ok; 2 strata::Error (ConfigError, misuse); 3 NetworkError; 4 TimeoutError;
// 5 MismatchError; 1 anything else (wrong result, bad arguments, other exceptions).
//
// Scenarios (--mode):
//   init     strata::init + finalize only (config errors happen here)
//   loop     allreduce --count floats --iters times (or until --seconds), checking every
//            result; rank --victim raises SIGKILL before iteration --kill-at. With
//            --buffer shared the floats live in a Group::allocateShared buffer (the
//            zero-copy path); --buffer private (default) in ordinary memory. With
//            --op p2p each iteration is a ring exchange instead (isend --count floats to
//            the next rank, receive from the previous one, check them): the stage links.
//   absent   one allreduce; rank --absent does not call it: --absent-how exit (returns
//            0 at once) or sleep (sleeps --sleep-ms first)
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.h"
#include "strata/group.h"
#include "strata/runtime.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string mode = "init";
  long iters = 100;
  double seconds = 0;  // > 0: stop the loop after this long, whatever --iters says
  size_t count = 1000;
  int victim = -1;
  long killAt = -1;
  int absent = -1;
  std::string absentHow = "exit";
  long sleepMs = 0;
  std::string buffer = "private";
  std::string op = "allreduce";
};

void say(const char* format, ...) __attribute__((format(printf, 1, 2)));
void say(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vfprintf(stdout, format, args);
  va_end(args);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

[[noreturn]] void usage(const std::string& problem) {
  say("usage error: %s", problem.c_str());
  std::exit(1);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--config") {
      ++i;  // strata::init reads it
    } else if (arg.rfind("--config=", 0) == 0) {
      // strata::init reads it
    } else if (arg == "--mode") {
      o.mode = value();
    } else if (arg == "--iters") {
      o.iters = std::stol(value());
    } else if (arg == "--seconds") {
      o.seconds = std::stod(value());
    } else if (arg == "--count") {
      o.count = std::stoul(value());
    } else if (arg == "--victim") {
      o.victim = std::stoi(value());
    } else if (arg == "--kill-at") {
      o.killAt = std::stol(value());
    } else if (arg == "--absent") {
      o.absent = std::stoi(value());
    } else if (arg == "--absent-how") {
      o.absentHow = value();
    } else if (arg == "--sleep-ms") {
      o.sleepMs = std::stol(value());
    } else if (arg == "--buffer") {
      o.buffer = value();
    } else if (arg == "--op") {
      o.op = value();
    } else {
      usage("unknown argument " + arg);
    }
  }
  if (o.mode != "init" && o.mode != "loop" && o.mode != "absent") usage("unknown --mode " + o.mode);
  if (o.absentHow != "exit" && o.absentHow != "sleep") usage("--absent-how is exit or sleep");
  if (o.buffer != "private" && o.buffer != "shared") usage("--buffer is private or shared");
  if (o.op != "allreduce" && o.op != "p2p") usage("--op is allreduce or p2p");
  return o;
}

const char* typeName(const strata::Error& e) {
  if (dynamic_cast<const strata::ConfigError*>(&e)) return "ConfigError";
  if (dynamic_cast<const strata::TimeoutError*>(&e)) return "TimeoutError";
  if (dynamic_cast<const strata::NetworkError*>(&e)) return "NetworkError";
  if (dynamic_cast<const strata::MismatchError*>(&e)) return "MismatchError";
  if (dynamic_cast<const strata::StoreError*>(&e)) return "StoreError";
  return "Error";
}

int exitCodeFor(const strata::Error& e) {
  if (dynamic_cast<const strata::TimeoutError*>(&e)) return 4;
  if (dynamic_cast<const strata::NetworkError*>(&e)) return 3;
  if (dynamic_cast<const strata::MismatchError*>(&e)) return 5;
  return 2;
}

// Where the scenario is, for the failure report.
long currentIteration = -1;
Clock::time_point collectiveStart;

void allreduceChecked(float* data, size_t count, long iteration) {
  const int n = strata::size();
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(strata::rank() + 1 + (i % 7));
  currentIteration = iteration;
  collectiveStart = Clock::now();
  strata::world().allreduce(data, data, count, strata::DType::kFloat32);
  for (size_t i = 0; i < count; ++i) {
    const float want = static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 7));
    if (data[i] != want) {
      say("wrong result at iteration %ld element %zu: %g, want %g", iteration, i, data[i], want);
      std::fflush(stdout);
      std::_Exit(1);
    }
  }
}

// One ring exchange over the point-to-point links: `data` to the next rank, the previous
// rank's values (tagged with the iteration) checked.
void exchangeChecked(float* data, size_t count, long iteration) {
  const int n = strata::size(), rank = strata::rank();
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  static std::vector<float> got;
  got.assign(count, -1.0f);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(rank * 1000 + (i % 7) + iteration % 5);
  currentIteration = iteration;
  collectiveStart = Clock::now();
  const auto tag = static_cast<uint64_t>(iteration);
  auto send = strata::world().isend(data, count * sizeof(float), next, tag);
  strata::world().irecv(got.data(), count * sizeof(float), prev, tag)->wait();
  send->wait();
  for (size_t i = 0; i < count; ++i) {
    const float want = static_cast<float>(prev * 1000 + (i % 7) + iteration % 5);
    if (got[i] != want) {
      say("wrong message at iteration %ld element %zu: %g, want %g", iteration, i, got[i], want);
      std::fflush(stdout);
      std::_Exit(1);
    }
  }
}

int runScenario(const Options& o) {
  const int rank = strata::rank();
  say("ready rank=%d size=%d pid=%d", rank, strata::size(), static_cast<int>(getpid()));
  std::vector<float> privateData;
  std::shared_ptr<strata::SharedBuffer> shared;
  float* data = nullptr;
  if (o.buffer == "shared") {
    shared = strata::world().allocateShared(o.count * sizeof(float));
    data = static_cast<float*>(shared->data());
  } else {
    privateData.resize(o.count);
    data = privateData.data();
  }
  if (o.mode == "loop") {
    const auto start = Clock::now();
    long i = 0;
    for (; i < o.iters; ++i) {
      if (rank == o.victim && i == o.killAt) {
        say("victim: SIGKILL at iteration %ld", i);
        raise(SIGKILL);
      }
      if (o.seconds > 0 && std::chrono::duration<double>(Clock::now() - start).count() > o.seconds) break;
      if (o.op == "p2p") {
        exchangeChecked(data, o.count, i);
      } else {
        allreduceChecked(data, o.count, i);
      }
    }
    say("done iterations=%ld", i);
  } else if (o.mode == "absent") {
    if (rank == o.absent) {
      if (o.absentHow == "sleep") std::this_thread::sleep_for(std::chrono::milliseconds(o.sleepMs));
      say("absent: leaving without calling the collective");
      strata::finalize();
      return 0;
    }
    allreduceChecked(data, o.count, 0);
    say("done iterations=1");
  }
  strata::finalize();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Never outlive the driver (a killed test must not leave ranks behind).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const Options options = parse(argc, argv);
  try {
    strata::init(argc, argv);
    return runScenario(options);
  } catch (const strata::Error& e) {
    const auto ms = currentIteration >= 0 ? std::chrono::duration_cast<std::chrono::milliseconds>(
                                                Clock::now() - collectiveStart)
                                                .count()
                                          : -1;
    say("error: %s", e.what());
    say("error-type: %s", typeName(e));
    if (currentIteration >= 0) say("failed-after-ms: %lld iteration=%ld", static_cast<long long>(ms), currentIteration);
    const auto teardown = Clock::now();
    try {
      strata::finalize();
    } catch (const std::exception& f) {
      say("finalize failed: %s", f.what());
    }
    say("finalize-ms: %lld", static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                        Clock::now() - teardown)
                                                        .count()));
    return exitCodeFor(e);
  } catch (const std::exception& e) {
    say("unexpected exception: %s", e.what());
    return 1;
  }
}
