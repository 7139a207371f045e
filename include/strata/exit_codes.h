// Process exit codes with a meaning for launchers and `strata run`.
#pragma once

namespace strata {

// What each exit status means to a scheduler and to `strata run` (docs/exit_status.md).

// Training stopped on SIGTERM, SIGINT or SIGUSR1 (a spot reclaim, Ctrl-C, a scheduler's
// warning forwarded by mpirun) after writing a complete checkpoint: interrupted, not
// failed; resume it with checkpoint.resume. 75 is EX_TEMPFAIL of <sysexits.h> ("try again
// later"); it differs from 128 + SIGTERM = 143, what a process killed by the signal reports.
// `strata run` restarts it unless `strata run` itself was asked to stop.
inline constexpr int kExitStopped = 75;

// The job config (file, environment, secret file) is invalid: 78 is EX_CONFIG of
// <sysexits.h>. `strata run` does not restart it: the next attempt would fail the same way.
inline constexpr int kExitConfigError = 78;

// A job that failed (any rank's error, a dead peer): `strata run` restarts it.
inline constexpr int kExitFailed = 1;

}  // namespace strata
