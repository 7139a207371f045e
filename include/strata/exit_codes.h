// Process exit codes with a meaning for launchers and `strata run`.
#pragma once

namespace strata {

// Training stopped on SIGTERM or SIGINT (a spot reclaim, Ctrl-C) after writing a complete
// checkpoint: not a failure, resume it later with checkpoint.resume. `strata run` does not
// restart a job that exits with it. 75 is EX_TEMPFAIL of <sysexits.h> ("try again later");
// it differs from 128 + SIGTERM = 143, what a process killed by the signal reports.
inline constexpr int kExitStopped = 75;

// A job that failed (any rank's error, a dead peer): `strata run` restarts it.
inline constexpr int kExitFailed = 1;

}  // namespace strata
