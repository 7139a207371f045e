#include "profiler/system_monitor.h"

#include <pthread.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/atomic_file.h"
#include "core/logging.h"
#include "profiler/layout.h"

namespace strata::profiler {

std::optional<std::string> readTextFile(const std::string& path) {
  // /proc files report size 0: read to EOF instead of trusting the size.
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return text.str();
}

// --- SystemMetricsFileWriter ---------------------------------------------------------

SystemMetricsFileWriter::SystemMetricsFileWriter(std::string profilerRoot, int hostIndex)
    : root_(std::move(profilerRoot)), hostIndex_(hostIndex), nodeId_(hostNodeId(hostIndex)) {}

SystemMetricsFileWriter::~SystemMetricsFileWriter() { close(); }

void SystemMetricsFileWriter::close() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  currentRelPath_.clear();
}

void SystemMetricsFileWriter::writeSample(int64_t timestampUs,
                                          const std::vector<SystemMetric>& metrics) {
  if (metrics.empty()) return;
  const std::string rel = systemMetricsRelPath(timestampUs, hostIndex_);
  if (rel != currentRelPath_) {
    close();
    const std::filesystem::path path = std::filesystem::path(root_) / rel;
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    file_ = openOutputFile(path.string(), "a");
    if (file_ == nullptr)
      throw std::runtime_error("cannot open " + path.string() + ": " + std::strerror(errno));
    currentRelPath_ = rel;
  }
  std::string text;
  for (const SystemMetric& m : metrics) {
    text += formatSystemMetricLine(m, nodeId_, timestampUs);
    text += '\n';
  }
  // One fwrite per sample, then flush: a reader never sees half a sample for long, and a
  // torn last line is skipped by every reader.
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0) {
    const std::string why = std::strerror(errno);
    const std::string path = root_ + "/" + currentRelPath_;
    close();
    throw std::runtime_error("cannot write " + path + ": " + why);
  }
}

// --- SystemMonitor -------------------------------------------------------------------

SystemMonitor::SystemMonitor(SystemMonitorOptions options)
    : opts_(std::move(options)), writer_(opts_.profilerRoot, opts_.hostIndex) {
  if (!opts_.clock) opts_.clock = processClock();
  if (!opts_.readText) opts_.readText = readTextFile;
  if (!opts_.gpus) opts_.gpus = makeNvmlGpuSource();
}

template <typename T, typename Parse>
std::optional<T> SystemMonitor::readProc(const char* file, Parse parse) {
  const std::string path = opts_.procDir + "/" + file;
  const std::optional<std::string> text = opts_.readText(path);
  if (text) {
    T parsed = parse(*text);
    if (!parsed.empty()) return parsed;
  }
  if (warned_.first(path)) {
    STRATA_LOG(kWarn, kProf, "system monitor: cannot ", text ? "parse " : "read ", path,
               "; its metrics are left out (sampling goes on)");
  }
  return std::nullopt;
}

ProcSnapshot SystemMonitor::readSnapshot() {
  ProcSnapshot snap;
  snap.timestampUs = opts_.clock->nowUs();
  snap.cpu = readProc<CpuSnapshot>("stat", [](const std::string& t) { return parseProcStat(t); });
  snap.mem = readProc<MemInfo>("meminfo", [](const std::string& t) { return parseMeminfo(t); });
  snap.disk = readProc<DiskSnapshot>("diskstats",
                                     [](const std::string& t) { return parseDiskstats(t); });
  snap.net = readProc<NetSnapshot>("net/dev", [](const std::string& t) { return parseNetDev(t); });
  return snap;
}

size_t SystemMonitor::sampleOnce() {
  try {
    ProcSnapshot cur = readSnapshot();
    const std::vector<GpuReading> gpus = opts_.gpus->read();
    size_t written = 0;
    if (prev_) {
      const std::vector<SystemMetric> metrics = buildSystemMetrics(*prev_, cur, gpus);
      writer_.writeSample(cur.timestampUs, metrics);
      written = metrics.size();
    }
    prev_ = std::move(cur);
    return written;
  } catch (const std::exception& e) {
    if (warned_.first(std::string("sample: ") + e.what()))
      STRATA_LOG(kWarn, kProf, "system monitor: ", e.what(), " (sampling goes on)");
    return 0;
  }
}

// --- SystemSampler -------------------------------------------------------------------

SystemSampler::SystemSampler(SystemMonitorOptions options, std::chrono::milliseconds interval)
    : monitor_(std::move(options)), interval_(interval) {
  thread_ = std::thread([this] { run(); });
}

SystemSampler::~SystemSampler() { stop(); }

void SystemSampler::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t SystemSampler::samplesTaken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return samples_;
}

void SystemSampler::run() {
  pthread_setname_np(pthread_self(), "strata-prof");
  auto next = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    monitor_.sampleOnce();
    lock.lock();
    ++samples_;
    // Fixed rate: ticks stay on the interval grid; after a stall, skip missed ticks.
    next += interval_;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now + interval_;
    cv_.wait_until(lock, next, [this] { return stopping_; });
  }
}

}  // namespace strata::profiler
