// A rank's profiler session: the runtime-facing API of the profiler.
//
//   auto session = profiler::Session::start(config.profiler, info);   // strata::init
//   session->stepBegin(step);  ...  session->stepEnd(step);            // every step
//   session->recordSlice("fc1", phases::kForward, Track::kCompute, t0, dur);
//   session->stop();                                                   // strata::finalize
//
// What it writes under <output_dir>/profiler-output/ (profiler/layout.h):
//   * always (unless disable_profiler): steps/<node>_steps.jsonl, every step's duration;
//   * at every step (unless disable_profiler): the timeline's step event
//     (Step:ModeKeys.<MODE>) and the model's own Forward / Backward(post-forward) slices,
//     as smdebug's PyTorch hook writes them (its job statistics start at step 0);
//   * inside the framework_profile window: everything else in the Chrome-trace timeline
//     (pythontimeline): per-layer slices, AllReduce, data loading, pipeline, user ranges;
//   * with SessionInfo::runSystemSampler (local rank 0 only, one per host): system metrics
//     every system_monitor_interval_millis.
//
// Threads: a writer thread "strata-prof-io" per session drains the event buffer every
// kWriterTick and does all file I/O; the sampler thread "strata-prof" when enabled.
// Recording never does I/O and never blocks on it.
//
// Clock: profiler/clock.h (µs since the epoch, wall clock anchored once, monotonic after).
// Trace ts are relative to start_time_since_epoch_in_micros = the session's start time.
//
// Errors: nothing here throws or fails the job. A failure (unwritable directory, full
// disk, bad /proc file) is logged once as a warning and the session carries on, dropping
// what it cannot write.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "config/config.h"
#include "profiler/clock.h"
#include "profiler/event_buffer.h"
#include "profiler/framework_window.h"
#include "profiler/gpu_source.h"
#include "profiler/system_monitor.h"
#include "profiler/timeline_event.h"
#include "profiler/timeline_file_writer.h"
#include "profiler/warn_once.h"

namespace strata::profiler {

struct SessionInfo {
  std::string outputDir;  // the job's output_dir; files go to <outputDir>/profiler-output
  int rank = 0;
  int worldSize = 1;
  int hostIndex = 0;      // node index; system NodeId is algo-<hostIndex + 1>
  std::string hostname;   // shown in the timeline as "rank N (hostname)"
  bool runSystemSampler = false;  // true on exactly one rank per host (local rank 0)
  bool makeCurrent = true;        // becomes profiler::current() (STRATA_PROFILE lands here)
  // This rank's clock offset against a reference rank, added to every timestamp (0: trust
  // NTP). The runtime may measure it at init.
  std::chrono::microseconds clockOffset{0};
  // Test hooks; defaults are the real thing.
  std::shared_ptr<const Clock> clock;   // null: processClock()
  ReadTextFn readProcText;              // null: read /proc
  std::unique_ptr<GpuSource> gpus;      // null: NVML through dlopen
  RotationPolicy rotation;
};

struct SessionStats {
  uint64_t eventsRecorded = 0;  // accepted into the buffer
  uint64_t eventsDropped = 0;   // buffer full
  uint64_t stepsRecorded = 0;
  uint64_t traceFilesClosed = 0;
  uint64_t systemSamples = 0;
};

class Session {
 public:
  // Never throws: on any failure it logs a warning and returns a session that records
  // nothing. With config.disableProfiler it returns such an inert session too.
  static std::unique_ptr<Session> start(const config::ProfilerConfig& config, SessionInfo info);
  ~Session();  // stop()
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // --- recording: thread-safe, cheap, never block on I/O, never throw ----------------
  // Marks the start of a step (call on the training thread at the top of each step).
  // `step` is the global step (every mode's steps count; the framework_profile window and
  // the step timer use it), `modeStep` its number within `mode` (smdebug's mode_step,
  // written as args.step_num; -1: the same as `step`). Turns the detailed timeline on or
  // off according to the framework_profile window.
  void stepBegin(int64_t step, Mode mode = Mode::kTrain, int64_t modeStep = -1) noexcept;
  // Marks its end: the step timer records it, and the timeline gets the smdebug step event
  // (name and phase Step:ModeKeys.<MODE>, args.step_num = the mode step), inside the window
  // or not. An end without the matching begin is ignored (one warning).
  void stepEnd(int64_t step) noexcept;
  // Whether detailed slices are being recorded now: check it before building costly args.
  bool timelineActive() const noexcept { return timelineActive_.load(std::memory_order_relaxed); }
  // Whether step events and model-level slices are recorded (an enabled, running session).
  bool recordsSteps() const noexcept { return enabled_ && !stopped_.load(std::memory_order_relaxed); }
  // The session clock (µs since the epoch); use it for recordSlice times.
  int64_t nowUs() const noexcept;
  // One complete slice. Dropped when the timeline is off. Slices on one track must come
  // from one thread at a time so they nest (profiler/timeline_event.h).
  void recordSlice(std::string_view name, std::string_view phase, Track track, int64_t startUs,
                   int64_t durUs, std::vector<Arg> args = {}) noexcept;
  void recordSlice(std::string_view name, std::string_view phase, int tid, int64_t startUs,
                   int64_t durUs, std::vector<Arg> args = {}) noexcept;
  // A model-level slice (the model's Forward or Backward(post-forward), a pipeline stage's
  // per microbatch): recorded at every step while recordsSteps(), inside the framework
  // window or not.
  void recordModelSlice(std::string_view name, std::string_view phase, Track track, int64_t startUs,
                        int64_t durUs, std::vector<Arg> args = {}) noexcept;
  // A slice that belongs to the step that just ended (the optimizer step after the model's
  // step): recorded, with that step's number, when `step` is the last ended step and it was
  // inside the framework window, even though the timeline may already be off.
  void recordForEndedStep(int64_t step, std::string_view name, std::string_view phase, Track track,
                          int64_t startUs, int64_t durUs) noexcept;
  // The data loader asked for the next batch (strata::DistributedSampler::next). The time
  // from the latest request to the next stepBegin() becomes a DataLoaderIter slice on the
  // data-loading track when that step is in the framework window: with libtorch's
  // single-process loader it is the batch's fetch and collation, plus whatever the loop
  // does before it calls step().
  void batchRequested() noexcept;

  // --- control -------------------------------------------------------------------------
  // Writes everything recorded so far and closes the open trace file, so readers (the
  // rule engine) see it. Blocks the caller up to `timeout`; returns false on timeout.
  bool flush(std::chrono::milliseconds timeout = std::chrono::seconds(10)) noexcept;
  // Stops recording, writes what is pending, closes files, joins the threads. Stops being
  // current() first. Idempotent; blocks until the writer finished (bounded by its I/O).
  void stop() noexcept;

  bool enabled() const { return enabled_; }
  const std::string& profilerRoot() const { return root_; }
  const std::string& nodeId() const { return nodeId_; }
  int rank() const { return info_.rank; }
  int64_t baseUs() const { return baseUs_; }  // start_time_since_epoch_in_micros
  SessionStats stats() const;

 private:
  Session(const config::ProfilerConfig& config, SessionInfo info, bool enabled);
  void startThreads();
  void setActive(bool active) noexcept;
  void accept(EventBuffer::Push result) noexcept;
  // Queues one slice for the writer, whatever the window (callers decide).
  void pushSlice(std::string_view name, std::string_view phase, int tid, int64_t startUs, int64_t durUs,
                 int64_t stepNum, std::vector<Arg> args) noexcept;
  void writerLoop();
  void writePending(std::vector<TimelineEvent>& events, std::vector<StepRecord>& steps);
  template <typename Fn>
  void guarded(const char* what, Fn&& fn) noexcept;

  const config::ProfilerConfig config_;
  SessionInfo info_;
  const bool enabled_;
  std::shared_ptr<const Clock> clock_;
  std::string root_;
  std::string nodeId_;
  int64_t baseUs_ = 0;
  FrameworkWindow window_;
  EventBuffer buffer_;
  WarnOnce warned_;

  std::atomic<bool> timelineActive_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<uint64_t> eventsRecorded_{0};
  std::atomic<uint64_t> stepsRecorded_{0};
  std::atomic<uint64_t> traceFilesClosed_{0};

  // Step state: written by stepBegin/stepEnd (the training thread), read by recordSlice.
  std::mutex stepMu_;
  int64_t stepStartUs_ = 0;
  int64_t openStep_ = -1;  // -1: no step open
  Mode stepMode_ = Mode::kTrain;
  int64_t stepModeStep_ = -1;
  bool stepInWindow_ = false;
  int64_t lastEndedStep_ = -1;        // for recordForEndedStep
  bool lastEndedInWindow_ = false;
  int64_t lastEndedStepNum_ = -1;
  std::atomic<int64_t> currentStep_{-1};  // the open (or last) step's mode step: slices' step_num
  std::atomic<int64_t> batchRequestedUs_{-1};  // -1: no request since the last stepBegin

  // Writer thread.
  std::mutex writerMu_;
  std::condition_variable writerCv_;
  std::condition_variable flushedCv_;
  bool stopping_ = false;
  std::atomic<bool> wakeWriter_{false};
  uint64_t flushRequested_ = 0;
  uint64_t flushDone_ = 0;
  std::thread writer_;
  std::unique_ptr<TimelineFileWriter> timelineWriter_;  // writer thread only
  std::unique_ptr<StepTimeWriter> stepWriter_;          // writer thread only
  std::unique_ptr<SystemSampler> sampler_;
};

// The process-wide current session (the one STRATA_PROFILE records into), or nullptr.
// The pointer is valid until that session's stop() begins: code on threads the runtime
// stops before the session may use it directly; anything else records through
// profiler::Range (include/strata/profiler.h) or ScopedSlice, which are safe against a
// concurrent stop().
Session* current() noexcept;

// RAII slice on a track of the current session (or of an explicit one). One branch when
// the timeline is off. Use on the thread that owns the track.
class ScopedSlice {
 public:
  ScopedSlice(const char* name, const char* phase, Track track) noexcept;
  ScopedSlice(Session* session, const char* name, const char* phase, Track track) noexcept;
  ~ScopedSlice();
  ScopedSlice(const ScopedSlice&) = delete;
  ScopedSlice& operator=(const ScopedSlice&) = delete;

 private:
  Session* session_;  // explicit session, or nullptr for current()
  const char* name_;
  const char* phase_;
  Track track_;
  int64_t startUs_;  // -1: not recording
};

// Writes <output_dir>/profiler-output/{system,framework}/training_job_end.ts, the marker
// smdebug's ProfilerTrial waits for (without it, it waits forever). Call once per job
// after every rank stopped its session (rank 0, after a barrier). Never throws; returns
// false (after a warning) on failure.
bool markTrainingJobEnd(const std::string& outputDir) noexcept;

namespace detail {
// For Session: becomes / stops being current(); waits (bounded) for in-flight ranges.
void setCurrent(Session* session) noexcept;
void clearCurrent(Session* session) noexcept;
void setRangesOn(Session* session, bool on) noexcept;
}  // namespace detail

}  // namespace strata::profiler
