// What a rank records into its timeline, before it is written: slices with a name, a
// phase (smdebug's "training phase", which becomes a Chrome-trace process in the rank's
// file) and a track (the Chrome-trace thread id).
//
// Tracks exist because Perfetto requires slices on one (pid, tid) to nest strictly:
// compute and communication overlap in time, so they go on different tracks. Each track
// must be fed by one thread at a time, whose slices then nest naturally.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "strata/types.h"

namespace strata::profiler {

// smdebug's ModeKeys (strata/types.h; modeName gives "TRAIN").
using strata::Mode;
using strata::modeName;
std::string_view stepPhaseName(Mode mode);  // "Step:ModeKeys.TRAIN"

// Chrome-trace tids of a rank. Values are part of the file format: do not renumber.
enum class Track : int {
  kSteps = 1,        // Step:ModeKeys.* events only
  kCompute = 2,      // forward/backward per layer or stage, optimizer, exposed comm waits
  kCommunication = 3,  // AllReduce per bucket (the comm thread)
  kDataLoading = 4,  // DataLoaderIter and friends
  kPipeline = 5,     // pipeline send/recv and idle (bubble) time
  kCheckpoint = 6,   // checkpoint writes
};
// User ranges get a track per thread: kUserTrackBase + an ordinal per thread.
inline constexpr int kUserTrackBase = 100;
int trackId(Track track);
// The thread_name of a tid: "steps", "compute", ..., or "user: <thread name>".
std::string trackName(int tid);
// The calling thread's user track (registered on first use, named after the thread).
// Thread-safe.
int userTrackOfThisThread();

// Phase names (become process names in a rank's file). Step phases come from
// stepPhaseName(); the forward/backward/data-loading ones are the PyTorch hook's
// (specs/smdebug.md §2.2), so smdebug's rules and report classify them as it does.
namespace phases {
inline constexpr char kForward[] = "Forward";
inline constexpr char kForwardSubmodule[] = "Forward-SubModuleInternal";
inline constexpr char kBackward[] = "Backward(post-forward)";
inline constexpr char kBackwardSubmodule[] = "Backward-SubModuleInternal";
inline constexpr char kDataLoaderIter[] = "DataLoaderIter";
inline constexpr char kAllReduce[] = "AllReduce";          // one slice per bucket
inline constexpr char kAllReduceWait[] = "AllReduceWait";  // exposed wait on the compute track
inline constexpr char kPipeline[] = "Pipeline";            // send / recv / idle
inline constexpr char kOptimizer[] = "Optimizer";
inline constexpr char kCheckpoint[] = "Checkpoint";
inline constexpr char kUserRange[] = "UserRange";  // STRATA_PROFILE / profiler::Range
}  // namespace phases

// One args entry, its value already rendered as JSON (rendering happens once, on the
// recording thread, only while the timeline is on). Numbers, bools and strings.
struct Arg {
  template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Arg(std::string k, T v) : key(std::move(k)), json(renderArithmetic(v)) {}
  Arg(std::string k, std::string_view v);
  Arg(std::string k, const char* v) : Arg(std::move(k), std::string_view(v)) {}

  std::string key;
  std::string json;

 private:
  static std::string renderDouble(double v);  // null when not finite
  template <typename T>
  static std::string renderArithmetic(T v) {
    if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
    else if constexpr (std::is_floating_point_v<T>) return renderDouble(static_cast<double>(v));
    else return std::to_string(v);
  }
};

struct TimelineEvent {
  std::string name;
  std::string phase;
  int tid = trackId(Track::kCompute);
  int64_t startUs = 0;  // epoch µs
  int64_t durUs = 0;
  int64_t step = -1;    // the rank's step when recorded; -1 before the first
  std::vector<Arg> args;  // "pid" and "step_num" are added by the writer: do not use them
};

// The always-on step timer: one per finished step.
struct StepRecord {
  int64_t step = 0;
  Mode mode = Mode::kTrain;
  int64_t startUs = 0;  // epoch µs
  int64_t durUs = 0;
};

}  // namespace strata::profiler
