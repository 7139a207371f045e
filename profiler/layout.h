// Where profiler files go and how they are named (specs/smdebug.md §2, §8.12-8.13; the
// names are load-bearing: smdebug's readers select files by the node and time in them).
//
//   <output_dir>/profiler-output/                                   "profiler root"
//     system/incremental/<YYYYMMDDHH>/<minute_epoch_s>.algo-<N>.json     system metrics
//     system/training_job_end.ts                                          end marker
//     framework/<node_id>_pythontimeline.json.tmp                         open trace file
//     framework/pevents/<YYYYMMDDHH>/<last_end_us>_<node_id>_pythontimeline.json
//     framework/training_job_end.ts                                       end marker
//     steps/<node_id>_steps.jsonl            always-on step timer (Strata's own; smdebug
//                                            never lists this folder)
//
// Hours are UTC. node_id is "<rank>-algo-<host index + 1>": no '_' (smdebug splits file
// names on '_'), and smdebug displays it as "algo-<n>-<rank>". Pure, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace strata::profiler {

constexpr int64_t kUsPerSecond = 1000000;

inline constexpr char kProfilerDirName[] = "profiler-output";
inline constexpr char kJobEndMarkerName[] = "training_job_end.ts";

// <output_dir>/profiler-output
std::string profilerRoot(const std::string& outputDir);
// RUN_DIR as a user gives it: the output_dir (has profiler-output/) or the profiler root.
std::string resolveProfilerRoot(const std::string& runDir);

// "algo-<hostIndex + 1>", the NodeId of system metrics.
std::string hostNodeId(int hostIndex);
// "<rank>-algo-<hostIndex + 1>", the node id of a rank's trace files.
std::string rankNodeId(int rank, int hostIndex);

// "YYYYMMDDHH" of an epoch time in µs, UTC.
std::string utcHourDir(int64_t epochUs);

// system/incremental/<YYYYMMDDHH>/<minute>.algo-<N>.json for the minute holding epochUs.
std::string systemMetricsRelPath(int64_t epochUs, int hostIndex);
// framework/pevents/<YYYYMMDDHH>/<lastEndUs>_<nodeId>_pythontimeline.json
std::string traceRelPath(int64_t lastEndUs, const std::string& nodeId);
// framework/<nodeId>_pythontimeline.json.tmp
std::string openTraceRelPath(const std::string& nodeId);
// steps/<nodeId>_steps.jsonl
std::string stepTimesRelPath(const std::string& nodeId);

// smdebug's validity gate for system files: ".+/system/.+/(\d{10}).algo-\d+.json".
// Returns the 10-digit stamp in seconds, or nullopt.
std::optional<int64_t> systemFileStampSeconds(std::string_view path);

// Trace file names "<stamp>_<node>_<suffix>" under a "pevents" folder (smdebug's rule:
// ends with .json, >= 3 '_'-separated parts). The stamp is µs.
struct TraceFileName {
  int64_t stampUs = 0;
  std::string nodeId;  // as written in the name, e.g. "0-algo-1"
  std::string suffix;  // "pythontimeline.json", "model_timeline.json", ...
};
std::optional<TraceFileName> parseTraceFileName(std::string_view path);

// smdebug's display form of a node id: "X-algo-N" becomes "algo-N-X"; others unchanged.
std::string normalizeNodeId(const std::string& nodeId);
// The rank of a "<rank>-algo-<n>" node id, else -1.
int rankOfNodeId(const std::string& nodeId);

}  // namespace strata::profiler
