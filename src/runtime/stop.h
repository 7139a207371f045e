// Stop requests: why training should end at the next step boundary, wherever the request
// came from (a signal such as SIGTERM from a spot reclaim or Ctrl-C, a rule's StopTraining
// action, the stop file of an out-of-process `strata rules --watch`, or the program itself).
//
// Requests are local to a process; strata::should_stop() turns them into one answer shared
// by every rank (an allreduce of the causes), so all ranks leave the loop at the same step.
// The answer is sticky: once every rank agreed to stop, later calls return true at once,
// without communication (every rank has the same answer, so none waits for the others).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace strata::runtime {

// Stronger causes win when ranks disagree (the allreduce takes the maximum).
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
// Clears every request and the agreed answer (tests; a new run in the same process).
void resetStop();
// The run ended (strata::finalize): its agreed answer, user and rule requests, the rule
// signal and the stop-file watch are consumed, so a later init() in the same process starts
// clean. A signal stays: the process was asked to end, and the next run stops at once.
void endStopRun();

// The stop file (rules::StopSignal::stopFilePath) of an out-of-process rule engine.
// The runtime calls watchStopFile(output_dir) on rank 0 at init: from then on should_stop()
// looks for the file at most every `interval` and turns it into a kRule request. Files older
// than the call (minus kStopFileClockSlackMs, for a file server's clock) are leftovers of an
// earlier run in the same folder and ignored. watchStopFile("") stops watching (finalize).
void watchStopFile(const std::string& outputDir, int64_t intervalMs = 500);

// How far a stop file's mtime may lag behind watchStopFile's call and still count.
inline constexpr int64_t kStopFileClockSlackMs = 2000;

// Pure: whether to look for the stop file now (monotonic ms).
inline bool stopFileCheckDue(int64_t nowMs, int64_t lastCheckMs, int64_t intervalMs) {
  return nowMs - lastCheckMs >= intervalMs;
}
// Pure: whether a stop file modified at `mtimeMs` belongs to the run watching since
// `watchSinceMs` (both wall-clock ms since the epoch).
inline bool stopFileIsCurrent(int64_t mtimeMs, int64_t watchSinceMs) {
  return mtimeMs >= watchSinceMs - kStopFileClockSlackMs;
}
// Pure: the request text for a stop file's content ({"rule": ..., "reason": ...}); any other
// content (a file made with `touch`) still asks to stop, for the reason "stop file".
std::string stopFileRequestText(const std::string& content, const std::string& path);

// A rule's stop request travels with should_stop()'s allreduce as one int64 key per rank:
// the largest key is the earliest (step, rank), so every rank learns which rule request
// came first and from where; kNoRuleKey when the rank has none with a step. Pure.
inline constexpr int64_t kNoRuleKey = INT64_MIN;
inline constexpr int64_t kRuleKeyRankSpan = int64_t{1} << 20;  // ranks below 2^20
int64_t encodeRuleKey(int64_t step, int rank);
// False for kNoRuleKey.
bool decodeRuleKey(int64_t key, int64_t* step, int* rank);

// The rule verdict every rank agreed on at the stop (from the rank whose request won).
struct AgreedRule {
  std::string rule;    // empty: none (not a rule, or a rule request without a step)
  std::string reason;
  int64_t step = -1;   // the global step whose data showed the issue
  int rank = -1;       // the rank whose in-process engine found it
};
AgreedRule agreedRule();

// The training code reached a step boundary: the debugger data saved so far belongs to
// complete steps, which the in-process rule engine may evaluate now (debugger::StepTap).
// should_stop() calls it first; training code that never calls should_stop() gets the same
// at the next step's begin. Cheap (a mutex and a queue push); never blocks.
void stepDataComplete();

}  // namespace strata::runtime
