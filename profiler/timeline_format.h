// Pure serialisation of one rank's events into smdebug's pythontimeline lines
// (specs/smdebug.md §2.2, §8.13-8.14). Each line is one JSON object followed by ",\n", so
// a file that is still open can be read line by line; the file writer closes the array.
//
// Every file starts with
//   {"name":"process_name","ph":"M","pid":0,"args":{"name":"rank 3 (node07)",
//    "start_time_since_epoch_in_micros":T0}}
//   {"name":"process_sort_index","ph":"M","pid":0,"args":{"sort_index":0}}
// and, before the first use IN THIS FILE of a phase or of a (phase, track) pair:
//   process_name / process_sort_index for the phase's pid (numbered 1, 2, ... in order of
//   first use over the writer's lifetime, as smdebug does), then
//   thread_sort_index / thread_name for the track (sort index first: smdebug's parser
//   renames a thread "Unknown" on thread_sort_index, so the name must come last).
// Events: {"name":..,"pid":<phase pid>,"tid":<track>,"ph":"X","ts":<start - T0 µs>,
//          "dur":<µs>,"args":{"pid":<os pid>,"step_num":"<step>",...}}
// step_num is a string (smdebug's hook writes it so) and is left out before step 0.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "profiler/timeline_event.h"

namespace strata::profiler {

// One caller thread at a time.
class TimelineFormatter {
 public:
  // baseUs: T0 (start_time_since_epoch_in_micros). processLabel: "rank 3 (node07)".
  TimelineFormatter(int64_t baseUs, std::string processLabel, int64_t osPid);

  // Forget what the current file declared (call when a new file starts).
  void beginFile();
  // Appends the event's line, preceded by whatever metadata this file still lacks.
  void append(const TimelineEvent& event, std::string& out);

  int64_t baseUs() const { return baseUs_; }

 private:
  int phasePid(const std::string& phase);

  const int64_t baseUs_;
  const std::string processLabel_;
  const int64_t osPid_;
  std::map<std::string, int> phasePids_;  // writer lifetime
  bool fileStarted_ = false;
  std::set<int> declaredPids_;                 // this file
  std::set<std::pair<int, int>> declaredThreads_;  // this file: (pid, tid)
};

}  // namespace strata::profiler
