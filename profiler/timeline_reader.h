// Reads framework trace files (ours, and smdebug's recorded formats) the way smdebug's
// LocalAlgorithmMetricsReader and TraceEventParser do (specs/smdebug.md §2.2), for the
// rule engine and `strata trace`.
//
// Files: <root>/framework/**/pevents/**/<stamp µs>_<node>_<suffix>.json; the suffix picks
// the file type: pythontimeline -> "PythontimelineMetrics", model_timeline ->
// "DetailedframeworkMetrics", smdataparallel_timeline -> "SMDataParallelMetrics",
// horovod_timeline -> "" (smdebug classifies Horovod by the empty type). Open files
// (framework/<node>_pythontimeline.json.tmp) are read on request. Not read: TF profiler
// .trace.json.gz files.
// Events: X events, and B/E pairs matched per pid; start = ts + start_time_since_epoch_
// in_micros of the file (0 without it); the phase is the process_name of the event's pid.
// Queries return events that overlap [start, end] (an event across a boundary is returned
// for both windows, as smdebug does), from files whose stamp >= start - kFileSelection
// Buffer, up to the first stamp >= end + kFileSelectionBuffer.
// Tolerance: a complete array is parsed whole; an unclosed array or torn last line is
// read line by line; undecodable lines are skipped and counted.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace strata::profiler {

struct TraceEvent {
  std::string name;
  std::string phase;     // process name of its pid: "Step:ModeKeys.TRAIN", "Forward", ...
  std::string nodeId;    // smdebug's display form: "algo-1-3" for our "3-algo-1"
  int rank = -1;         // from a "<rank>-algo-<n>" node id, else -1
  int64_t startUs = 0;   // epoch µs
  int64_t endUs = 0;
  int64_t durUs = 0;
  int pid = 0;           // as in the file (our files: the phase's pid)
  int tid = 0;           // as in the file (our files: the track)
  nlohmann::json args;   // object (may be empty)
  std::string fileType;  // "PythontimelineMetrics", ...

  // args.step_num as a number (smdebug writes it as a string), if present.
  std::optional<int64_t> stepNum() const;
};

// What one trace file holds. Pure data.
struct TraceFileContents {
  std::optional<int64_t> baseUs;  // start_time_since_epoch_in_micros
  std::map<int, std::string> processNames;                 // pid -> name
  std::map<std::pair<int, int>, std::string> threadNames;  // (pid, tid) -> name
  std::vector<TraceEvent> events;
  size_t badLines = 0;
  bool complete = false;  // parsed as a whole, closed JSON array
};

// Parses one file's text. nodeId is the name's node (as written); fileType per suffix.
TraceFileContents parseTraceText(const std::string& text, const std::string& nodeId,
                                 const std::string& fileType);
// The file type smdebug assigns to a file-name suffix ("" for Horovod and unknown ones).
std::string traceFileType(const std::string& suffix);

struct TraceQuery {
  int64_t startUs = std::numeric_limits<int64_t>::min();
  int64_t endUs = std::numeric_limits<int64_t>::max();
  std::string nodeId;        // empty: any; either form ("3-algo-1" or "algo-1-3")
  int rank = -1;             // -1: any
  std::string phase;         // empty: any; exact match
  std::string nameContains;  // empty: any (smdebug's rules test "Step:ModeKeys" in name)
};

struct TraceFile {
  std::string path;
  int64_t stampUs = 0;  // max for open files
  std::string nodeId;   // as written in the name
  std::string fileType;
  bool open = false;    // a .tmp file still being written
};

// One caller thread at a time. Files are parsed on every query (no cache).
class TimelineReader {
 public:
  explicit TimelineReader(std::string profilerRoot, bool includeOpenFiles = false);

  void refresh();
  std::vector<TraceEvent> events(const TraceQuery& query);

  const std::vector<TraceFile>& files() const { return files_; }  // by stamp
  std::vector<int64_t> fileStampsUs() const;                      // closed files only
  size_t badLines() const { return badLines_; }

 private:
  std::string root_;
  bool includeOpen_;
  std::vector<TraceFile> files_;
  size_t badLines_ = 0;
};

// Every trace file under <root>/framework, sorted by stamp then path. Pure listing.
std::vector<TraceFile> listTraceFiles(const std::string& profilerRoot, bool includeOpenFiles);

}  // namespace strata::profiler
