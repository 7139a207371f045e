#include "profiler/session.h"

#include <pthread.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/logging.h"
#include "profiler/layout.h"

namespace strata::profiler {
namespace {

// How often the writer thread drains the buffer: bounds the memory held by pending events
// and the delay before a time window opens or closes.
constexpr auto kWriterTick = std::chrono::milliseconds(100);
// Pending events beyond this are dropped (about 50 MB at ~200 bytes each): a stalled disk
// costs bounded memory, never a blocked training thread. At one drain per kWriterTick it
// is only reached by millions of slices per second.
constexpr size_t kMaxPendingEvents = size_t{1} << 18;
// A burst that fills a quarter of the buffer wakes the writer before its tick.
constexpr size_t kWakeWriterEvents = kMaxPendingEvents / 4;

std::string localHostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

}  // namespace

Session::Session(const config::ProfilerConfig& config, SessionInfo info, bool enabled)
    : config_(config),
      info_(std::move(info)),
      enabled_(enabled),
      clock_(info_.clock ? info_.clock : processClock()),
      root_(::strata::profiler::profilerRoot(info_.outputDir)),
      nodeId_(rankNodeId(info_.rank, info_.hostIndex)),
      window_(FrameworkWindow::from(config.frameworkProfile)),
      buffer_(kMaxPendingEvents, kWakeWriterEvents) {
  if (info_.clockOffset.count() != 0)
    clock_ = std::make_shared<OffsetClock>(clock_, info_.clockOffset);
  if (info_.hostname.empty()) info_.hostname = localHostname();
  baseUs_ = clock_->nowUs();
}

std::unique_ptr<Session> Session::start(const config::ProfilerConfig& config, SessionInfo info) {
  const int rank = info.rank;
  try {
    std::unique_ptr<Session> s(new Session(config, std::move(info), !config.disableProfiler));
    if (s->enabled_) s->startThreads();
    return s;
  } catch (const std::exception& e) {
    STRATA_LOG(kWarn, kProf, "profiler could not start on rank ", rank, ": ", e.what(),
               "; training goes on without profiling");
  }
  try {
    return std::unique_ptr<Session>(new Session(config, SessionInfo{}, /*enabled=*/false));
  } catch (...) {
    return nullptr;  // only std::bad_alloc can get here
  }
}

void Session::startThreads() {
  std::error_code ec;
  std::filesystem::create_directories(root_, ec);
  if (ec) {
    STRATA_LOG(kWarn, kProf, "profiler: cannot create ", root_, ": ", ec.message(),
               " (profiler files will be missing)");
  }
  const std::string label = "rank " + std::to_string(info_.rank) + " (" + info_.hostname + ")";
  timelineWriter_ = std::make_unique<TimelineFileWriter>(
      root_, nodeId_, TimelineFormatter(baseUs_, label, static_cast<int64_t>(getpid())),
      info_.rotation);
  stepWriter_ = std::make_unique<StepTimeWriter>(root_, nodeId_, info_.rank);
  if (info_.runSystemSampler) {
    SystemMonitorOptions opts;
    opts.profilerRoot = root_;
    opts.hostIndex = info_.hostIndex;
    opts.clock = clock_;
    opts.readText = info_.readProcText;
    opts.gpus = std::move(info_.gpus);
    sampler_ = std::make_unique<SystemSampler>(std::move(opts), config_.systemMonitorInterval);
  }
  writer_ = std::thread([this] { writerLoop(); });
  setActive(window_.activeAtStart(clock_->nowUs()));
  if (info_.makeCurrent) detail::setCurrent(this);
}

Session::~Session() { stop(); }

int64_t Session::nowUs() const noexcept { return clock_->nowUs(); }

void Session::setActive(bool active) noexcept {
  if (stopped_.load(std::memory_order_relaxed)) active = false;
  timelineActive_.store(active, std::memory_order_relaxed);
  detail::setRangesOn(this, active);
}

template <typename Fn>
void Session::guarded(const char* what, Fn&& fn) noexcept {
  try {
    fn();
  } catch (const std::exception& e) {
    if (warned_.first(std::string(what) + e.what()))
      STRATA_LOG(kWarn, kProf, "profiler ", what, ": ", e.what(), " (training goes on)");
  } catch (...) {
    if (warned_.first(what)) STRATA_LOG(kWarn, kProf, "profiler ", what, ": unknown error");
  }
}

// --- recording -------------------------------------------------------------------------

void Session::stepBegin(int64_t step, Mode mode, int64_t modeStep) noexcept {
  if (!enabled_ || stopped_.load(std::memory_order_relaxed)) return;
  const int64_t now = nowUs();
  bool inWindow = false;
  {
    std::lock_guard<std::mutex> lock(stepMu_);
    if (openStep_ >= 0 && warned_.first("stepBegin while open")) {
      STRATA_LOG(kWarn, kProf, "profiler: stepBegin(", step, ") while step ", openStep_,
                 " is still open; the open step is not recorded");
    }
    openStep_ = step;
    stepStartUs_ = now;
    stepMode_ = mode;
    stepModeStep_ = modeStep >= 0 ? modeStep : step;
    stepInWindow_ = window_.activeAtStepBegin(step, now);
    inWindow = stepInWindow_;
  }
  currentStep_.store(modeStep >= 0 ? modeStep : step, std::memory_order_relaxed);
  setActive(inWindow);
  const int64_t requested = batchRequestedUs_.exchange(-1, std::memory_order_relaxed);
  if (inWindow && requested >= 0 && requested <= now)
    recordSlice(phases::kDataLoaderIter, phases::kDataLoaderIter, Track::kDataLoading, requested,
                now - requested);
}

void Session::batchRequested() noexcept {
  if (!enabled_) return;
  batchRequestedUs_.store(nowUs(), std::memory_order_relaxed);
}

void Session::stepEnd(int64_t step) noexcept {
  if (!enabled_ || stopped_.load(std::memory_order_relaxed)) return;
  const int64_t now = nowUs();
  StepRecord record;
  int64_t stepNum = step;
  bool inWindow = false;
  {
    std::lock_guard<std::mutex> lock(stepMu_);
    if (openStep_ != step) {
      if (warned_.first("stepEnd without begin"))
        STRATA_LOG(kWarn, kProf, "profiler: stepEnd(", step, ") without stepBegin(", step,
                   "); ignored");
      return;
    }
    record = StepRecord{step, stepMode_, stepStartUs_, now - stepStartUs_};
    stepNum = stepModeStep_;
    inWindow = stepInWindow_;
    openStep_ = -1;
    lastEndedStep_ = step;
    lastEndedInWindow_ = inWindow;
    lastEndedStepNum_ = stepNum;
  }
  guarded("step", [&] {
    if (buffer_.pushStep(record)) stepsRecorded_.fetch_add(1, std::memory_order_relaxed);
    // Every step, inside the window or not: smdebug's analysis (job statistics, step
    // outliers) needs them all, from step 0.
    TimelineEvent e;
    e.name = std::string(stepPhaseName(record.mode));
    e.phase = e.name;
    e.tid = trackId(Track::kSteps);
    e.startUs = record.startUs;
    e.durUs = record.durUs;
    e.step = stepNum;
    accept(buffer_.push(std::move(e)));
  });
  setActive(window_.activeAfterStepEnd(step, now));
}

void Session::recordSlice(std::string_view name, std::string_view phase, Track track,
                          int64_t startUs, int64_t durUs, std::vector<Arg> args) noexcept {
  recordSlice(name, phase, trackId(track), startUs, durUs, std::move(args));
}

void Session::recordSlice(std::string_view name, std::string_view phase, int tid,
                          int64_t startUs, int64_t durUs, std::vector<Arg> args) noexcept {
  if (!timelineActive_.load(std::memory_order_relaxed)) return;
  pushSlice(name, phase, tid, startUs, durUs, currentStep_.load(std::memory_order_relaxed), std::move(args));
}

void Session::pushSlice(std::string_view name, std::string_view phase, int tid, int64_t startUs, int64_t durUs,
                        int64_t stepNum, std::vector<Arg> args) noexcept {
  guarded("record", [&] {
    TimelineEvent e;
    e.name = std::string(name);
    e.phase = std::string(phase);
    e.tid = tid;
    e.startUs = startUs;
    e.durUs = durUs;
    e.step = stepNum;
    e.args = std::move(args);
    accept(buffer_.push(std::move(e)));
  });
}

void Session::recordModelSlice(std::string_view name, std::string_view phase, Track track, int64_t startUs,
                               int64_t durUs, std::vector<Arg> args) noexcept {
  if (!recordsSteps()) return;
  pushSlice(name, phase, trackId(track), startUs, durUs, currentStep_.load(std::memory_order_relaxed),
            std::move(args));
}

void Session::recordForEndedStep(int64_t step, std::string_view name, std::string_view phase, Track track,
                                 int64_t startUs, int64_t durUs) noexcept {
  if (!enabled_ || stopped_.load(std::memory_order_relaxed)) return;
  int64_t stepNum = step;
  {
    std::lock_guard<std::mutex> lock(stepMu_);
    if (step != lastEndedStep_ || !lastEndedInWindow_ || openStep_ >= 0) return;
    stepNum = lastEndedStepNum_;
  }
  pushSlice(name, phase, trackId(track), startUs, durUs, stepNum, {});
}

void Session::accept(EventBuffer::Push result) noexcept {
  switch (result) {
    case EventBuffer::Push::kAcceptedWakeWriter:
      // Without the lock: a wake-up lost in a race costs at most one kWriterTick.
      wakeWriter_.store(true, std::memory_order_relaxed);
      writerCv_.notify_one();
      [[fallthrough]];
    case EventBuffer::Push::kAccepted:
      eventsRecorded_.fetch_add(1, std::memory_order_relaxed);
      return;
    case EventBuffer::Push::kDropped:
      if (warned_.first("buffer full")) {
        STRATA_LOG(kWarn, kProf, "profiler: event buffer full (", kMaxPendingEvents,
                   " pending); dropping timeline events until the writer catches up");
      }
      return;
  }
}

// --- writer thread ---------------------------------------------------------------------

void Session::writePending(std::vector<TimelineEvent>& events, std::vector<StepRecord>& steps) {
  guarded("timeline write", [&] { timelineWriter_->write(events, nowUs()); });
  guarded("step timer write", [&] { stepWriter_->write(steps); });
}

void Session::writerLoop() {
  pthread_setname_np(pthread_self(), "strata-prof-io");
  std::vector<TimelineEvent> events;
  std::vector<StepRecord> steps;
  std::unique_lock<std::mutex> lock(writerMu_);
  for (;;) {
    writerCv_.wait_for(lock, kWriterTick, [this] {
      return stopping_ || flushRequested_ > flushDone_ ||
             wakeWriter_.exchange(false, std::memory_order_relaxed);
    });
    const bool stopping = stopping_;
    const uint64_t flushTarget = flushRequested_;
    const bool closeNow = stopping || flushTarget > flushDone_;
    lock.unlock();
    buffer_.drain(&events, &steps);
    writePending(events, steps);
    const int64_t now = nowUs();
    guarded("timeline rotate", [&] {
      if (closeNow) timelineWriter_->closeFile();
      else timelineWriter_->maybeRotate(now);
    });
    traceFilesClosed_.store(timelineWriter_->closedFiles().size(), std::memory_order_relaxed);
    if (!stopping && window_.byTime()) setActive(window_.activeAtTime(now));
    lock.lock();
    flushDone_ = flushTarget;
    flushedCv_.notify_all();
    if (stopping) break;
  }
}

// --- control ---------------------------------------------------------------------------

bool Session::flush(std::chrono::milliseconds timeout) noexcept {
  if (!enabled_ || !writer_.joinable()) return true;
  std::unique_lock<std::mutex> lock(writerMu_);
  if (stopping_) return true;
  const uint64_t target = ++flushRequested_;
  writerCv_.notify_all();
  return flushedCv_.wait_for(lock, timeout, [&] { return flushDone_ >= target; });
}

void Session::stop() noexcept {
  if (stopped_.exchange(true)) return;
  detail::clearCurrent(this);
  timelineActive_.store(false, std::memory_order_relaxed);
  if (writer_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(writerMu_);
      stopping_ = true;
    }
    writerCv_.notify_all();
    writer_.join();
  }
  if (sampler_) sampler_->stop();
  guarded("close", [&] {
    if (stepWriter_) stepWriter_->close();
  });
}

SessionStats Session::stats() const {
  SessionStats s;
  s.eventsRecorded = eventsRecorded_.load(std::memory_order_relaxed);
  s.eventsDropped = buffer_.dropped();
  s.stepsRecorded = stepsRecorded_.load(std::memory_order_relaxed);
  s.traceFilesClosed = traceFilesClosed_.load(std::memory_order_relaxed);
  s.systemSamples = sampler_ ? sampler_->samplesTaken() : 0;
  return s;
}

bool markTrainingJobEnd(const std::string& outputDir) noexcept {
  try {
    const std::filesystem::path root = profilerRoot(outputDir);
    for (const char* dir : {"system", "framework"}) {
      std::filesystem::create_directories(root / dir);
      createOutputFile((root / dir / kJobEndMarkerName).string());
      std::ofstream marker(root / dir / kJobEndMarkerName);
      if (!marker) throw std::runtime_error("cannot write " + (root / dir).string());
    }
    return true;
  } catch (const std::exception& e) {
    STRATA_LOG(kWarn, kProf, "profiler: cannot write the training_job_end.ts markers: ",
               e.what());
    return false;
  }
}

}  // namespace strata::profiler
