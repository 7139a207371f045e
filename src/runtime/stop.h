// Stop requests: why training should end at the next step boundary, wherever the request
// came from (a signal such as SIGTERM from a spot reclaim or Ctrl-C, a rule's StopTraining
// action, the stop file of an out-of-process `strata rules --watch`, or the program itself).
//
// Requests are local to a process; strata::should_stop() turns them into one answer shared
// by every rank (an allreduce of the flags), so all ranks leave the loop at the same step.
#pragma once

#include <string>

namespace strata::runtime {

enum class StopCause : int { kNone = 0, kUser = 1, kRule = 2, kSignal = 3 };

const char* stopCauseName(StopCause cause);

// Async-signal-safe (only lock-free atomics): for signal handlers.
void requestStopFromSignal(int signo);
// Thread-safe. The first request's cause and text are kept.
void requestStop(StopCause cause, const std::string& why);

// This process's own request (no communication).
StopCause localStopCause();
// The signal that requested the stop (0: none).
int stopSignalNumber();
// Clears every request (tests; a new run in the same process).
void resetStop();

}  // namespace strata::runtime
