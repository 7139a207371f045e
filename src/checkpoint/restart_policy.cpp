#include "checkpoint/restart_policy.h"

#include "strata/exit_codes.h"

namespace strata::checkpoint {

int shellExitCode(const ChildExit& exit) { return exit.signaled ? 128 + exit.code : exit.code; }

RunDecision decideAfterExit(const ChildExit& exit, int restartsDone, int maxRestarts, bool launcherSignaled) {
  const int code = shellExitCode(exit);
  const std::string status = exit.signaled ? "was killed by signal " + std::to_string(exit.code)
                                           : "exited with code " + std::to_string(exit.code);
  if (!exit.signaled && exit.code == 0) return {RunAction::kSucceed, 0, "the job succeeded"};
  if (!exit.signaled && exit.code == kExitStopped)
    return {RunAction::kStopped, kExitStopped, "the job stopped on a signal after its checkpoint; not restarting"};
  if (launcherSignaled) return {RunAction::kStopped, code, "the job " + status + " after we were asked to stop"};
  if (restartsDone < maxRestarts)
    return {RunAction::kRestart, code,
            "the job " + status + "; restart " + std::to_string(restartsDone + 1) + " of " + std::to_string(maxRestarts)};
  return {RunAction::kGiveUp, code == 0 ? 1 : code,
          "the job " + status + "; no restarts left (" + std::to_string(maxRestarts) + " allowed)"};
}

}  // namespace strata::checkpoint
