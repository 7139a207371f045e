// What `strata run --max-restarts N -- <command>` does when its command ends: pure, so it
// is unit-tested apart from the process handling in src/cli/run_command.cpp.
//
//   exit 0                      -> done (success)
//   exit kExitStopped (75)      -> done: stopped by SIGTERM/SIGINT after a checkpoint; a
//                                  restart would undo what the signal asked for
//   the launcher was signalled  -> done (the user or the platform is stopping us)
//   anything else (a failure, a rank killed by a signal) -> restart while restarts remain;
//                                  resume from the newest complete checkpoint happens in the
//                                  job itself (checkpoint.resume)
#pragma once

#include <string>

namespace strata::checkpoint {

struct ChildExit {
  bool signaled = false;  // ended by a signal (code is then the signal number)
  int code = 0;
};

enum class RunAction { kSucceed, kStopped, kRestart, kGiveUp };

struct RunDecision {
  RunAction action = RunAction::kSucceed;
  int exitCode = 0;   // what `strata run` exits with (when not restarting)
  std::string why;    // one line for the log
};

// restartsDone: restarts already made; maxRestarts: allowed in total; launcherSignaled:
// `strata run` itself received SIGTERM/SIGINT (forwarded to the command).
RunDecision decideAfterExit(const ChildExit& exit, int restartsDone, int maxRestarts, bool launcherSignaled);

// The shell's convention for an exit status: code, or 128 + signal number.
int shellExitCode(const ChildExit& exit);

}  // namespace strata::checkpoint
