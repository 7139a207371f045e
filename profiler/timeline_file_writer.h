// Writes one rank's trace files the way smdebug's TimelineFileWriter does: append to
// framework/<node>_pythontimeline.json.tmp while open; on rotation close the JSON array
// and rename it to framework/pevents/<UTC hour of last end>/<last end µs>_<node>_
// pythontimeline.json (profiler/layout.h), which is when readers can see it. The stamp is
// the largest event end in the file, so time-range selection by file name never misses
// an event of the file.
//
// A .tmp file left by a crashed earlier run of the same node is not overwritten: before
// the first file is opened, its array is closed after its last whole line and it is moved
// into pevents/ like any other file.
//
// One caller thread at a time (the session's writer thread). Throws std::runtime_error
// naming the path and the errno text on I/O failure; the caller warns once and goes on.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "profiler/timeline_format.h"

namespace strata::profiler {

struct RotationPolicy {
  // smdebug's RotateMaxFileSizeInBytes and RotateFileCloseIntervalInSeconds defaults.
  size_t maxFileBytes = 10 * 1024 * 1024;
  std::chrono::seconds closeInterval{60};
};

// Pure: close the open file now? openedAtUs is when its first event was written.
bool shouldRotate(size_t fileBytes, int64_t openedAtUs, int64_t nowUs,
                  const RotationPolicy& policy);

class TimelineFileWriter {
 public:
  TimelineFileWriter(std::string profilerRoot, std::string nodeId, TimelineFormatter formatter,
                     RotationPolicy policy = {});
  ~TimelineFileWriter();  // closes (renames) the open file; never throws
  TimelineFileWriter(const TimelineFileWriter&) = delete;
  TimelineFileWriter& operator=(const TimelineFileWriter&) = delete;

  // Appends the events (in the given order), rotating first when the policy says so.
  void write(const std::vector<TimelineEvent>& events, int64_t nowUs);
  // Rotates an idle open file when the interval has passed.
  void maybeRotate(int64_t nowUs);
  // Closes the array and renames the open file into pevents/; no-op without one.
  void closeFile();

  // Final paths of the files closed so far (tests, stats).
  const std::vector<std::string>& closedFiles() const { return closedFiles_; }

 private:
  void open(int64_t nowUs);
  void recoverLeftover();
  void appendText(const std::string& text);

  const std::string root_;
  const std::string nodeId_;
  TimelineFormatter formatter_;
  const RotationPolicy policy_;
  std::FILE* file_ = nullptr;
  std::string tmpPath_;
  size_t fileBytes_ = 0;
  int64_t openedAtUs_ = 0;
  int64_t maxEndUs_ = 0;
  bool checkedLeftover_ = false;
  std::vector<std::string> closedFiles_;
};

// Appends the always-on step timer's lines to steps/<node>_steps.jsonl:
//   {"rank":3,"node":"3-algo-1","step":12,"mode":"TRAIN","start_us":...,"dur_us":...}
// One caller thread at a time; throws std::runtime_error on I/O failure.
class StepTimeWriter {
 public:
  StepTimeWriter(std::string profilerRoot, std::string nodeId, int rank);
  ~StepTimeWriter();
  StepTimeWriter(const StepTimeWriter&) = delete;
  StepTimeWriter& operator=(const StepTimeWriter&) = delete;

  void write(const std::vector<StepRecord>& steps);  // appends and flushes
  void close();

 private:
  const std::string path_;
  const std::string nodeId_;
  const int rank_;
  std::FILE* file_ = nullptr;
};

// The line StepTimeWriter writes for one step (no newline). Pure.
std::string formatStepLine(const StepRecord& step, int rank, const std::string& nodeId);

}  // namespace strata::profiler
