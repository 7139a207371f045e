// What `strata run --max-restarts N -- <command>` does when its command ends: pure, so it
// is unit-tested apart from the process handling in src/cli/run_command.cpp. The exit
// codes are those of docs/exit_status.md (mpirun passes on the first non-zero rank's):
//
//   exit 0                      -> done (success; also a rule's StopTraining)
//   `strata run` was signalled  -> done: the user or the platform is stopping us; the
//                                  command's code is passed on (75 once it checkpointed)
//   exit kExitConfigError (78)  -> done: a restart would fail the same way; fix the config
//   exit kExitStopped (75)      -> restart while restarts remain: the job was interrupted
//                                  from outside (a node's SIGTERM, mpirun's SIGUSR1) after a
//                                  checkpoint and resumes from it; with none left, 75
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

// The signal `strata run` sends its command when asked to stop (--stop-signal `name`):
// "auto" gives SIGUSR1 when the command (a path or a name) is Open MPI's mpirun, mpiexec or
// orterun (they kill the job on SIGTERM, but forward SIGUSR1), else 0 (pass on the signal
// received); "TERM", "INT", "USR1" (with or without "SIG") give that signal; else -1.
int stopSignalFor(const std::string& name, const std::string& command);

}  // namespace strata::checkpoint
