// `strata trace`: merges every rank's timeline of a run into one Chrome-trace JSON file
// that Perfetto (ui.perfetto.dev) and chrome://tracing open.
//
// Layout of the merged trace: pid = rank, process_name "rank N (host)" (from the rank's
// own pid-0 process_name), tid = the rank's track (steps, compute, communication, ...)
// with its thread_name; each slice keeps its phase as `cat` and its args. Times: ts = the
// slice's epoch start minus the earliest start_time_since_epoch_in_micros of all ranks,
// so ranks are aligned by their recorded clock base (profiler/clock.h); that base is kept
// in otherData. Files whose node id is not "<rank>-algo-<n>" (smdebug's own) get pids
// after the highest rank.
// Strict nesting: Perfetto requires slices on one (pid, tid) to nest. A slice that would
// partially overlap another on its track is moved to an overlap track
// tid + k * kOverflowTidStride ("<track> (overlap k)") instead of being dropped.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace strata::profiler {

inline constexpr int kOverflowTidStride = 1000;

struct MergedSlice {
  std::string name;
  std::string cat;  // the phase
  int pid = 0;
  int tid = 0;
  int64_t tsUs = 0;  // relative to the merged base
  int64_t durUs = 0;
  nlohmann::json args = nlohmann::json::object();
};

// Moves slices that break strict nesting on their (pid, tid) to overlap tracks; returns
// how many moved. Pure.
size_t nestSlicesStrictly(std::vector<MergedSlice>& slices);
// Slices that break strict nesting on their (pid, tid): 0 for a valid trace. Pure.
size_t countNestingViolations(const std::vector<MergedSlice>& slices);

struct MergeReport {
  size_t files = 0;
  size_t ranks = 0;  // processes in the merged trace
  size_t slices = 0;
  size_t movedForNesting = 0;
  size_t badLines = 0;
  int64_t baseUs = 0;
};

struct MergedTrace {
  std::vector<nlohmann::json> metadata;  // process/thread names and sort indices
  std::vector<MergedSlice> slices;       // sorted by pid, tid, ts, longest first
  MergeReport report;
};

// Reads every trace file under <profilerRoot>/framework (open .tmp files too when asked:
// a crashed run leaves its last file open). Never throws on bad content (bad lines are
// counted); an empty run gives an empty trace.
MergedTrace mergeTimelines(const std::string& profilerRoot, bool includeOpenFiles = true);

// {"traceEvents":[ one event per line ],"displayTimeUnit":"ms","otherData":{...}}
void writeMergedTrace(const MergedTrace& trace, std::ostream& out);

}  // namespace strata::profiler
