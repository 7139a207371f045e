// `strata run --max-restarts N -- mpirun -np 4 ./train --config job.json`: runs a training
// job and restarts it when it fails (a rank died, a node was lost) or was interrupted from
// outside after a checkpoint (exit 75), up to N times; a config error (exit 78) or success
// ends the loop. The job resumes from its newest complete checkpoint by itself
// (checkpoint.resume in its config); this command only decides whether to run it again
// (checkpoint/restart_policy.h, docs/exit_status.md).
//
// SIGTERM/SIGINT sent to `strata run` end the loop and are passed on to the command as its
// stop signal (--stop-signal): by default SIGUSR1 when the command is Open MPI's
// mpirun/mpiexec/orterun, which forwards SIGUSR1 to every rank but answers SIGTERM by
// killing the job and exiting 1; the ranks then checkpoint and exit 75, and so does mpirun.
// Every attempt gets STRATA_RESTART_COUNT=<restarts so far> in its environment.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/restart_policy.h"
#include "cli/command_registry.h"

namespace strata::cli {
namespace {

namespace ck = strata::checkpoint;

std::atomic<pid_t> childPid{0};
std::atomic<int> forwardedSignal{0};  // what we received (0: nothing)
std::atomic<int> stopSignal{0};       // what the command gets instead (0: the same signal)

int signalForChild(int received) {
  const int translated = stopSignal.load();
  return translated != 0 ? translated : received;
}

void forwardToChild(int signo) {
  forwardedSignal.store(signo);
  const pid_t pid = childPid.load();
  if (pid > 0) kill(pid, signalForChild(signo));
}

struct ForwardSignals {
  struct sigaction oldTerm {}, oldInt {};
  ForwardSignals() {
    struct sigaction action {};
    action.sa_handler = forwardToChild;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &action, &oldTerm);
    sigaction(SIGINT, &action, &oldInt);
  }
  ~ForwardSignals() {
    sigaction(SIGTERM, &oldTerm, nullptr);
    sigaction(SIGINT, &oldInt, nullptr);
  }
};

std::vector<std::string> environmentWith(const std::string& assignment) {
  const std::string name = assignment.substr(0, assignment.find('=') + 1);
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, name.c_str(), name.size()) != 0) out.emplace_back(*e);
  out.push_back(assignment);
  return out;
}

// Runs the command to its end; the exit status. Throws nothing: a spawn failure is
// reported as exit code 127, as a shell does.
ck::ChildExit runOnce(const std::vector<std::string>& command, int restarts) {
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::vector<std::string> env = environmentWith("STRATA_RESTART_COUNT=" + std::to_string(restarts));
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data());
  if (rc != 0) {
    std::fprintf(stderr, "strata run: cannot start %s: %s\n", argv[0], std::strerror(rc));
    return {false, 127};
  }
  childPid.store(pid);
  if (forwardedSignal.load() != 0) kill(pid, signalForChild(forwardedSignal.load()));  // arrived while spawning
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  childPid.store(0);
  if (WIFSIGNALED(status)) return {true, WTERMSIG(status)};
  return {false, WEXITSTATUS(status)};
}

int runWithRestarts(const std::vector<std::string>& command, int maxRestarts, int delayMs) {
  ForwardSignals forward;
  for (int restarts = 0;; ++restarts) {
    const auto start = std::chrono::steady_clock::now();
    const ck::ChildExit exit = runOnce(command, restarts);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const ck::RunDecision d = ck::decideAfterExit(exit, restarts, maxRestarts, forwardedSignal.load() != 0);
    std::fprintf(stderr, "strata run: attempt %d ended after %.1f s: %s\n", restarts + 1, secs, d.why.c_str());
    if (d.action != ck::RunAction::kRestart) return d.exitCode;
    std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
    if (forwardedSignal.load() != 0) return ck::shellExitCode(exit);
  }
}

const CommandRegistrar registrar("run", [](CLI::App& app, int& exitCode) {
  CLI::App* cmd = app.add_subcommand("run", "Run a training job, restarting it from its checkpoint when it fails");
  auto maxRestarts = std::make_shared<int>(0);
  auto delayMs = std::make_shared<int>(1000);
  auto command = std::make_shared<std::vector<std::string>>();
  auto stopName = std::make_shared<std::string>("auto");
  cmd->add_option("--max-restarts", *maxRestarts, "restarts after failures (0: run once)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--restart-delay-ms", *delayMs, "pause before a restart (ports and shared memory get freed)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--stop-signal", *stopName,
                  "what the command gets when strata run is asked to stop: auto (SIGUSR1 for mpirun/mpiexec, which "
                  "kill the job on SIGTERM; else the signal received), TERM, INT or USR1");
  cmd->add_option("command", *command, "the job: everything after --, e.g. mpirun -np 2 ./train")->required();
  cmd->callback([&exitCode, maxRestarts, delayMs, command, stopName] {
    const int translated = ck::stopSignalFor(*stopName, command->front());
    if (translated < 0) throw CLI::ValidationError("--stop-signal", "\"" + *stopName + "\" is not auto, TERM, INT or USR1");
    stopSignal.store(translated);
    exitCode = runWithRestarts(*command, *maxRestarts, *delayMs);
  });
});

}  // namespace
}  // namespace strata::cli
