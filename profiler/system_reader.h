// Reads system-metric files (ours or SageMaker's) the way smdebug's
// LocalSystemMetricsReader does (specs/smdebug.md §2.1), for the rule engine.
//
// Files: every <root>/system/**/<10-digit epoch s>.algo-<N>.json (smdebug's validity
// regex), keyed by the stamp in the name. A query reads the file with the largest stamp
// <= start - kFileSelectionBuffer, then every file up to the first with stamp >=
// end + kFileSelectionBuffer (smdebug's 3-minute buffer), and keeps events with
// start <= Timestamp <= end (inclusive on both ends), in file order.
// Tolerance: a torn last line is skipped silently (a file still being written); any other
// bad line is skipped and counted (smdebug raises; we report it in badLines()).
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace strata::profiler {

struct SystemEvent {
  std::string type;       // "cpu", "gpu", "memory", "i/o", "network"
  std::string name;       // "cpu0", "MemoryUsedPercent", ... (may be empty)
  std::string dimension;  // "CPUUtilization", "Algorithm", ... (may be empty)
  std::string nodeId;     // "algo-1"
  double value = 0;
  double timestampS = 0;  // float epoch seconds, as in the file
  int64_t timestampUs = 0;
};

struct SystemQuery {
  int64_t startUs = std::numeric_limits<int64_t>::min();  // inclusive
  int64_t endUs = std::numeric_limits<int64_t>::max();    // inclusive
  std::string type;       // empty: any (smdebug's event_type filter)
  std::string nodeId;     // empty: any
  std::string dimension;  // empty: any
  std::string name;       // empty: any
};

inline constexpr std::chrono::minutes kFileSelectionBuffer{3};

// One caller thread at a time. Parsed files are cached and re-read when their size
// changes (files of the current minute grow while a job runs).
class SystemMetricsReader {
 public:
  // profilerRoot: <output_dir>/profiler-output (or any folder holding system/).
  explicit SystemMetricsReader(std::string profilerRoot);

  // Re-lists the files; call it to see files created since the last call.
  void refresh();
  std::vector<SystemEvent> events(const SystemQuery& query);

  // Stamps of the files found (µs), ascending: front() is ProfilerTrial's first_timestamp.
  std::vector<int64_t> fileStampsUs() const;
  // Distinct NodeIds seen in the files read so far.
  std::vector<std::string> nodes() const;
  size_t badLines() const { return badLines_; }

 private:
  struct CachedFile {
    uintmax_t bytes = 0;
    std::vector<SystemEvent> events;
    size_t badLines = 0;
  };
  const std::vector<SystemEvent>& load(const std::string& path);

  std::string root_;
  std::multimap<int64_t, std::string> files_;  // stamp µs -> path
  std::map<std::string, CachedFile> cache_;
  size_t badLines_ = 0;
};

// Parses one system-metric file's text. Pure. Lines missing a required key (Type,
// Dimension, Value, NodeId, Timestamp; Name is optional, as in smdebug) count as bad;
// *lastLineTorn tells whether the last line did not parse (a write in progress).
std::vector<SystemEvent> parseSystemMetricsText(const std::string& text, size_t* badLines,
                                                bool* lastLineTorn = nullptr);

}  // namespace strata::profiler
