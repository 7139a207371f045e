// SIGTERM, SIGINT and SIGUSR1 as stop requests: a spot reclaim, Ctrl-C, or mpirun
// forwarding a scheduler's SIGUSR1 lets the current step finish, a checkpoint be written
// (strata::CheckpointManager), and the process exit with strata::kExitStopped. A second signal of the same kind a second or more after the first
// ends the process the default way (a user who presses Ctrl-C twice means it); repeats
// within that second are the same Ctrl-C delivered through several launchers and ignored.
//
// STRATA_HANDLE_SIGNALS=0 leaves the three signals alone (the program's own handlers win).
// Threading: install/uninstall from one thread (init/finalize); the handler itself is
// async-signal-safe (runtime::requestStopFromSignal, sigaction, raise).
#pragma once

namespace strata::runtime {

// Installs the handlers once (idempotent); remembers the previous ones.
void installStopSignalHandlers();
// Restores the previous handlers (idempotent).
void uninstallStopSignalHandlers();
bool stopSignalHandlersInstalled();

}  // namespace strata::runtime
