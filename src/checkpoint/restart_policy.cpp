#include "checkpoint/restart_policy.h"

#include <csignal>

#include "strata/exit_codes.h"

namespace strata::checkpoint {

int shellExitCode(const ChildExit& exit) { return exit.signaled ? 128 + exit.code : exit.code; }

RunDecision decideAfterExit(const ChildExit& exit, int restartsDone, int maxRestarts, bool launcherSignaled) {
  const int code = shellExitCode(exit);
  const std::string status = exit.signaled ? "was killed by signal " + std::to_string(exit.code)
                                           : "exited with code " + std::to_string(exit.code);
  const bool stopped = !exit.signaled && exit.code == kExitStopped;
  if (!exit.signaled && exit.code == 0) return {RunAction::kSucceed, 0, "the job succeeded"};
  if (launcherSignaled) {
    return {RunAction::kStopped, code,
            stopped ? "the job stopped after its checkpoint, as we were asked to; not restarting"
                    : "the job " + status + " after we were asked to stop"};
  }
  if (!exit.signaled && exit.code == kExitConfigError)
    return {RunAction::kGiveUp, kExitConfigError, "the job's configuration is invalid; not restarting (fix it first)"};
  const std::string what = stopped ? "the job was interrupted after its checkpoint" : "the job " + status;
  if (restartsDone < maxRestarts)
    return {RunAction::kRestart, code,
            what + "; restart " + std::to_string(restartsDone + 1) + " of " + std::to_string(maxRestarts)};
  if (stopped) return {RunAction::kStopped, kExitStopped, what + "; no restarts left, it can resume later"};
  return {RunAction::kGiveUp, code == 0 ? 1 : code,
          what + "; no restarts left (" + std::to_string(maxRestarts) + " allowed)"};
}

int stopSignalFor(const std::string& name, const std::string& command) {
  if (name == "auto") {
    const size_t slash = command.rfind('/');
    const std::string base = slash == std::string::npos ? command : command.substr(slash + 1);
    return base == "mpirun" || base == "mpiexec" || base == "orterun" ? SIGUSR1 : 0;
  }
  const std::string bare = name.rfind("SIG", 0) == 0 ? name.substr(3) : name;
  if (bare == "TERM") return SIGTERM;
  if (bare == "INT") return SIGINT;
  if (bare == "USR1") return SIGUSR1;
  return -1;
}

}  // namespace strata::checkpoint
