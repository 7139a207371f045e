// The debugger hook of one rank: decides which tensors are due at each step and hands them
// to the background writer (specs/smdebug.md §1). Torch-free: tensors arrive as typed raw
// buffers; src/adapter/observe/debugger_hook.cpp adapts torch::Tensor.
//
// Step model (smdebug's): every beginStep() advances the global step by one and the step
// counter of its mode by one; both start at 0. Collections are due on MODE steps (a
// collection with save_interval 10 saves TRAIN steps 0, 10, 20 and EVAL steps 0, 10 ...),
// files are named by the GLOBAL step, and each global step has exactly one mode.
//
// Per training step, from the training thread:
//   if (hook.beginStep(Mode::kTrain)) {          // false: nothing due, skip all capture work
//     hook.saveTensor("Net_fc1.weight", ...);     // parameters, before forward
//     ... forward: layer outputs if hook.wantsTensor(name) ...
//     ... backward, gradient all-reduce: gradients "gradient/Net_fc1.weight" ...
//     hook.saveTensor("Loss_output_0", ...);
//   }
//   hook.endStep();                               // optional: no more model tensors
//   hook.saveScalar("accuracy", acc);             // any time: joins the current step
// The step's files are published when the next step begins, or at flush()/close(), so
// scalars saved after the step (metrics, validation results) still land in it.
//
// In-process consumers (the online rule engine) get what is saved through the process's
// StepTap (debugger/step_tap.h), taken at construction; the files are written all the same.
//
// Threading: all methods are thread-safe (one mutex); they are meant for the training
// thread. Nothing here blocks on I/O except flush()/close() and saveTensor() when the writer
// queue is full (TrialWriterOptions::maxQueuedBytes).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/config.h"
#include "debugger/collections.h"
#include "debugger/step_tap.h"
#include "debugger/trial_writer.h"
#include "debugger/types.h"

namespace strata::debugger {

struct HookOptions {
  std::string outputDir;  // the trial directory (the job's output_dir)
  int rank = 0;
  int worldSize = 1;
  std::string worker;     // empty: "worker_<rank>"
  bool tensorboard = true;
  bool durable = true;    // fdatasync files before publishing them
  size_t maxQueuedBytes = kDefaultMaxQueuedBytes;
};

// The global step and the per-mode steps, for checkpoint/resume. -1: not started.
struct StepCounters {
  int64_t globalStep = -1;
  std::array<int64_t, 4> modeSteps{-1, -1, -1, -1};  // indexed by int(Mode) - 1
};

class Hook {
 public:
  // Writes nothing when the config has no collections, or when include_workers is "one"
  // and rank != 0. Otherwise starts the writer thread and queues the collections file, with
  // num_workers = worldSize ("all") or 1 ("one"). Throws strata::Error for a bad worker
  // name or regex.
  Hook(const config::DebuggerConfig& config, HookOptions options);
  ~Hook();  // close(false)
  Hook(const Hook&) = delete;
  Hook& operator=(const Hook&) = delete;

  bool writes() const { return writer_ != nullptr; }
  int numWorkers() const { return numWorkers_; }
  const std::string& worker() const { return worker_; }
  const std::string& outputDir() const { return options_.outputDir; }
  const std::vector<Collection>& collections() const { return collections_; }

  // Starts the next step of `mode`; returns whether any collection is due on this rank.
  bool beginStep(Mode mode);
  // No more model tensors for this step (saveTensor returns false until the next step).
  void endStep();
  bool anythingDue() const;
  // Whether the collection `name` is due at the current step (false if not configured).
  bool isDue(const std::string& collectionName) const;
  // Whether some due collection selects `tensorName` (regex result cached per name).
  // Cheap (no regex) on steps where nothing is due.
  bool wantsTensor(const std::string& tensorName);

  // Saves a tensor if wanted: copies `data` (numel(shape) * dtypeBytes(dtype) bytes, C order)
  // into the writer queue and returns true; returns false without copying otherwise.
  bool saveTensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                  const void* data);
  // The same without the copy: `owner` keeps `data` alive and unchanged until the writer
  // releases it (e.g. a fresh CPU copy of a device tensor).
  bool saveTensorShared(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                        std::shared_ptr<const void> owner, const void* data);
  // A user metric: saved as "scalar/<name>" (shape [1], float64) in the current step's file
  // and as a TensorBoard scalar "<name>" at the current global step. Always written, whatever
  // the schedule (smdebug's save_scalar); before the first step, to TensorBoard only.
  void saveScalar(const std::string& name, double value);

  // Waits until everything queued is on disk and the current step is published.
  void flush();
  // Flushes and stops the writer. With `writeEndMarker`, also writes training_job_end.ts:
  // pass true only when no rank will write anymore (e.g. rank 0 after a barrier), or call
  // writeEndMarker() yourself. Idempotent.
  void close(bool writeEndMarker);

  Mode mode() const;
  int64_t globalStep() const;
  int64_t modeStep() const;
  StepCounters counters() const;
  // Resumes counting after a checkpoint (before the first beginStep).
  void restoreCounters(const StepCounters& counters);
  // The writer's first error, empty if none (errors are also logged).
  std::string firstError() const;
  uint64_t bytesWritten() const;
  // Test only: items handed to the writer thread so far.
  uint64_t TEST_writerItems() const;

 private:
  void enqueueLocked(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                     TensorBytes bytes, CollectionMask containing);
  bool wantsLocked(const std::string& tensorName, CollectionMask* containing);
  void queueStepLocked();

  HookOptions options_;
  std::string worker_;
  int numWorkers_ = 1;
  std::vector<Collection> collections_;
  mutable std::mutex mutex_;
  CollectionMatcher matcher_;
  std::unique_ptr<TrialWriter> writer_;  // null: this rank writes nothing
  std::shared_ptr<StepTap> tap_;         // stepTap() at construction, when this rank writes
  StepCounters counters_;
  Mode mode_ = Mode::kGlobal;
  bool inStep_ = false;
  bool modelTensorsOpen_ = false;
  CollectionMask due_ = 0;
  bool stepQueued_ = false;  // the writer knows the current step (it has a file open)
  bool closed_ = false;
};

// Writes <outputDir>/training_job_end.ts (empty). Readers stop waiting for steps when it
// appears. Call once, after every rank has closed its hook (also from a launcher after a
// crash).
void writeEndMarker(const std::string& outputDir);

}  // namespace strata::debugger
