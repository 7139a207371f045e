// The files one worker writes for one step, and its TensorBoard scalar files. Both are used
// only by the writer thread (not thread-safe).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "debugger/file_util.h"
#include "debugger/histogram.h"
#include "debugger/trial_files.h"
#include "debugger/types.h"

namespace strata::debugger {

// One (global step, worker) event file and its index (specs/smdebug.md §1.1, §8.5):
// records are appended to events/<step>/<step>_<worker>.tfevents.tmp; publish() renames the
// event file into place, then writes the index JSON (itself by rename), so an index never
// names a missing event file and neither file is ever seen half-written. A writer that is
// destroyed unpublished removes its temporary file.
class StepFileWriter {
 public:
  StepFileWriter(std::string trialDir, std::string worker, int64_t globalStep, Mode mode,
                 int64_t modeStep, bool durable);
  ~StepFileWriter();

  // Appends one tensor record (tensor already in a stored dtype).
  void writeTensor(const std::string& name, TensorData&& tensor, double wallTime);
  // smdebug's save_shape: lists the tensor's shape in the index (shape_payload) without
  // writing its value.
  void addShape(const std::string& name, const std::vector<int64_t>& shape);
  // Tensors and shapes listed so far.
  size_t numTensors() const { return index_.tensors.size() + index_.shapes.size(); }
  uint64_t bytesWritten() const { return file_ ? file_->size() : 0; }
  // Publishes the event file (if a tensor was written) and the index; nothing when neither a
  // tensor nor a shape was.
  void publish();

 private:
  std::string trialDir_;
  std::string worker_;
  int64_t globalStep_;
  bool durable_;
  IndexFile index_;
  std::unique_ptr<AppendFile> file_;  // opened at the first tensor
  bool published_ = false;
};

// TensorBoard scalar and histogram event files, one per mode: <trial>/tensorboard/<MODE>/<worker>/
// events.out.tfevents.<unix seconds>.<host>.<pid> (TensorBoard reads any name containing
// "tfevents"; each directory is one run). Records carry real payload CRCs and the first
// event is file_version "brain.Event:2". Files are appended to and flushed at each step:
// TensorBoard tails event files and waits on a partial last record.
class TensorboardWriter {
 public:
  TensorboardWriter(std::string trialDir, std::string worker);
  void writeScalar(Mode mode, const std::string& tag, double value, int64_t step, double wallTime);
  void writeHistogram(Mode mode, const std::string& tag, const Histogram& histogram, int64_t step,
                      double wallTime);
  void flush();
  void close();

 private:
  AppendFile& fileFor(Mode mode, double wallTime);

  std::string trialDir_;
  std::string worker_;
  std::map<Mode, std::unique_ptr<AppendFile>> files_;
};

}  // namespace strata::debugger
