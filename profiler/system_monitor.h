// The system monitor: reads /proc and NVML, turns two readings into smdebug system-metric
// lines (profiler/system_metrics.h) and appends them to one file per wall-clock minute
// (profiler/layout.h). SystemMonitor takes one sample per call (no thread: tests drive it
// with fixtures and a ManualClock); SystemSampler runs it on the "strata-prof" thread.
//
// Failures never stop training: an unreadable /proc file or an unwritable output file is
// reported once as a warning and sampling goes on without it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "profiler/clock.h"
#include "profiler/gpu_source.h"
#include "profiler/warn_once.h"

namespace strata::profiler {

// Returns a file's whole text, or nullopt when it cannot be read.
using ReadTextFn = std::function<std::optional<std::string>(const std::string& path)>;
std::optional<std::string> readTextFile(const std::string& path);

struct SystemMonitorOptions {
  std::string profilerRoot;  // <output_dir>/profiler-output
  int hostIndex = 0;         // NodeId algo-<hostIndex + 1>
  std::shared_ptr<const Clock> clock;  // null: processClock()
  ReadTextFn readText;                 // null: readTextFile
  std::string procDir = "/proc";
  std::unique_ptr<GpuSource> gpus;  // null: makeNvmlGpuSource()
};

// Appends lines to system/incremental/<hour>/<minute>.algo-N.json, switching file when
// the minute changes. One caller thread at a time. Throws std::runtime_error (path and
// errno text) when a file cannot be opened or written.
class SystemMetricsFileWriter {
 public:
  SystemMetricsFileWriter(std::string profilerRoot, int hostIndex);
  ~SystemMetricsFileWriter();
  SystemMetricsFileWriter(const SystemMetricsFileWriter&) = delete;
  SystemMetricsFileWriter& operator=(const SystemMetricsFileWriter&) = delete;

  void writeSample(int64_t timestampUs, const std::vector<SystemMetric>& metrics);
  void close();

 private:
  std::string root_;
  int hostIndex_;
  std::string nodeId_;
  std::string currentRelPath_;
  std::FILE* file_ = nullptr;
};

// One caller thread at a time.
class SystemMonitor {
 public:
  explicit SystemMonitor(SystemMonitorOptions options);

  // Reads every source and writes the metrics of the interval since the previous call;
  // the first call only records the baseline. Returns the number of lines written.
  // Never throws.
  size_t sampleOnce();

 private:
  ProcSnapshot readSnapshot();
  template <typename T, typename Parse>
  std::optional<T> readProc(const char* file, Parse parse);

  SystemMonitorOptions opts_;
  SystemMetricsFileWriter writer_;
  std::optional<ProcSnapshot> prev_;
  WarnOnce warned_;
};

// Runs SystemMonitor::sampleOnce every `interval` on the thread "strata-prof" (the runtime
// starts one per host, on local rank 0). Thread-safe.
class SystemSampler {
 public:
  SystemSampler(SystemMonitorOptions options, std::chrono::milliseconds interval);
  ~SystemSampler();  // stop()
  SystemSampler(const SystemSampler&) = delete;
  SystemSampler& operator=(const SystemSampler&) = delete;

  // Stops and joins the thread; returns within about one sample's time (the wait for the
  // next tick is interrupted). Idempotent.
  void stop();
  uint64_t samplesTaken() const;

 private:
  void run();

  SystemMonitor monitor_;
  const std::chrono::milliseconds interval_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  uint64_t samples_ = 0;
  std::thread thread_;
};

}  // namespace strata::profiler
