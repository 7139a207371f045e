// MetricSource over profiler-output/ (profiler/layout.h): system-metric files, framework trace
// files and the always-on step timer, parsed with the profiler's parsers. Files are consumed
// once each, in the order of the stamps in their names (time order), so memory holds one file
// and the engine's open windows, not the run.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "profiler/layout.h"
#include "profiler/step_times.h"
#include "profiler/system_reader.h"
#include "profiler/timeline_reader.h"
#include "rules/memory_sources.h"
#include "rules/sources/file_sources.h"

namespace strata::rules {
namespace {

namespace fs = std::filesystem;

// A trace file holds events up to its stamp (the end of its last event), starting at most this
// long before it (the writer rotates files every 60 s; margin for slow flushes).
constexpr int64_t kTraceFileSpanUs = 5 * 60 * 1000000LL;
constexpr int64_t kSystemFileSpanUs = 60 * 1000000LL;  // one file per minute

bool readFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

FrameworkEvent toEvent(const profiler::TraceEvent& t) {
  FrameworkEvent e;
  e.rank = t.rank;
  e.node = t.nodeId;
  e.phase = t.phase;
  e.name = t.name;
  e.startUs = t.startUs;
  e.endUs = std::max(t.endUs, t.startUs);
  e.step = t.stepNum().value_or(-1);
  e.horovodTimeline = t.fileType.empty();
  if (t.args.is_object()) {
    for (const auto& item : t.args.items()) {
      if (item.key() == "step_num") continue;
      if (item.key() == "pid") {
        if (item.value().is_number_integer()) e.pid = item.value().get<int64_t>();
        else if (item.value().is_string()) e.pid = std::atoll(item.value().get<std::string>().c_str());
        continue;
      }
      e.args.emplace_back(item.key(), item.value().is_string() ? item.value().get<std::string>() : item.value().dump());
    }
  }
  return e;
}

FrameworkEvent toEvent(const profiler::StepTime& s) {
  FrameworkEvent e;
  e.rank = s.rank;
  e.node = profiler::normalizeNodeId(s.nodeId);
  e.phase = "Step:ModeKeys." + s.mode;
  e.name = e.phase;
  e.startUs = s.startUs;
  e.endUs = s.startUs + std::max<int64_t>(0, s.durUs);
  e.step = s.step;
  return e;
}

class ProfilerMetricSource final : public MetricSource {
 public:
  ProfilerMetricSource(std::string root, FileSourceOptions options) : root_(std::move(root)), options_(options) {
    rescan();
  }

  bool poll(MetricBatch& out, size_t maxItems) override {
    rescan();
    const size_t before = out.size();
    while (!pending_.empty() && out.size() - before < maxItems) {
      const Pending p = *pending_.begin();
      pending_.erase(pending_.begin());
      consumed_.insert(p.path);
      readUpTo_ = std::max(readUpTo_, p.stampUs + (p.system ? kSystemFileSpanUs : 0));
      std::string text;
      if (!readFile(p.path, &text)) continue;
      if (p.system) {
        size_t bad = 0;
        for (const auto& ev : profiler::parseSystemMetricsText(text, &bad)) {
          out.samples.push_back(makeSample(ev.timestampUs, ev.nodeId, ev.dimension, ev.name, ev.value));
          maxTimeUs_ = std::max(maxTimeUs_, ev.timestampUs);
        }
      } else {
        const auto contents = profiler::parseTraceText(text, p.node, p.fileType);
        for (const auto& t : contents.events) {
          // With the step timer, step events come from there (every step, every rank).
          if (useStepTimer_ && t.phase.find("Step:ModeKeys") != std::string::npos) continue;
          out.events.push_back(toEvent(t));
          maxTimeUs_ = std::max(maxTimeUs_, t.startUs);
        }
      }
    }
    readStepTimes(out);
    return out.size() > before;
  }

  int64_t watermarkUs() const override {
    if (allDelivered()) return maxTimeUs_ == std::numeric_limits<int64_t>::min() ? maxTimeUs_ : maxTimeUs_ + 1;
    int64_t w = std::numeric_limits<int64_t>::max();
    if (!pending_.empty()) {
      const Pending& p = *pending_.begin();
      w = p.system ? p.stampUs : p.stampUs - kTraceFileSpanUs;
    } else {
      // Following a live run: behind the newest stamps of both kinds, and a margin.
      if (!systemStamps_.empty()) w = std::min(w, *systemStamps_.rbegin() + kSystemFileSpanUs);
      if (!traceStamps_.empty()) w = std::min(w, *traceStamps_.rbegin());
    }
    if (w == std::numeric_limits<int64_t>::max() || readUpTo_ == std::numeric_limits<int64_t>::min())
      return std::numeric_limits<int64_t>::min();
    return std::min(w, readUpTo_) - (options_.follow ? options_.lagUs : 0);
  }

  bool finished() const override { return allDelivered(); }

  std::optional<int64_t> firstFileStampUs() const override {
    if (systemStamps_.empty()) return std::nullopt;
    int64_t first = *systemStamps_.begin();
    // ProfilerTrial: the framework's first stamp replaces it when smaller and the system's is non-zero.
    if (!traceStamps_.empty() && *traceStamps_.begin() < first && first != 0) first = *traceStamps_.begin();
    return first;
  }
  std::optional<int64_t> latestFileStampUs() const override {
    if (systemStamps_.empty()) return std::nullopt;
    int64_t latest = *systemStamps_.rbegin();
    if (!traceStamps_.empty() && *traceStamps_.rbegin() != 0) latest = std::min(latest, *traceStamps_.rbegin());
    return latest;
  }

 private:
  struct Pending {
    int64_t stampUs;
    std::string path;
    bool system;
    std::string node, fileType;
    bool operator<(const Pending& o) const { return stampUs != o.stampUs ? stampUs < o.stampUs : path < o.path; }
  };
  struct StepFile {
    uint64_t offset = 0;
    std::string partial;
    std::vector<profiler::StepTime> buffered;  // parsed, not yet delivered (ahead of the files)
    size_t next = 0;
  };

  bool allDelivered() const {
    if (!pending_.empty()) return false;
    if (options_.follow && !endMarker_) return false;
    for (const auto& [path, f] : stepFiles_) {
      std::error_code ec;
      const auto size = fs::file_size(path, ec);
      if (!ec && size > f.offset) return false;
      if (f.next < f.buffered.size()) return false;
    }
    return true;
  }

  void rescan() {
    std::error_code ec;
    endMarker_ = fs::exists(fs::path(root_) / "system" / profiler::kJobEndMarkerName, ec) ||
                 fs::exists(fs::path(root_) / "framework" / profiler::kJobEndMarkerName, ec);
    const fs::path sys = fs::path(root_) / "system";
    if (fs::is_directory(sys, ec)) {
      for (auto it = fs::recursive_directory_iterator(sys, ec); !ec && it != fs::end(it); it.increment(ec)) {
        if (!it->is_regular_file(ec)) continue;
        const std::string path = it->path().string();
        const auto stamp = profiler::systemFileStampSeconds(path);
        if (!stamp || consumed_.count(path) || queued_.count(path)) continue;
        // The current minute's file grows while the job runs: take it once a newer one exists.
        queued_.insert(path);
        pending_.insert({*stamp * 1000000, path, true, "", ""});
        systemStamps_.insert(*stamp * 1000000);
      }
    }
    for (const auto& f : profiler::listTraceFiles(root_, false)) {
      if (consumed_.count(f.path) || queued_.count(f.path)) continue;
      queued_.insert(f.path);
      pending_.insert({f.stampUs, f.path, false, f.nodeId, f.fileType});
      traceStamps_.insert(f.stampUs);
    }
    if (options_.follow && !endMarker_) holdBackGrowingSystemFiles();
    const fs::path steps = fs::path(root_) / "steps";
    if (!options_.compat && fs::is_directory(steps, ec)) {
      for (auto it = fs::directory_iterator(steps, ec); !ec && it != fs::end(it); it.increment(ec)) {
        const std::string p = it->path().string();
        if (p.size() > 12 && p.compare(p.size() - 12, 12, "_steps.jsonl") == 0) stepFiles_.emplace(p, StepFile{});
      }
      useStepTimer_ = !stepFiles_.empty();
    }
  }

  // While following, the newest system file of each node is still being appended to.
  void holdBackGrowingSystemFiles() {
    std::map<std::string, const Pending*> newestPerNode;
    for (const Pending& p : pending_) {
      if (!p.system) continue;
      const std::string node = fs::path(p.path).filename().string().substr(11);  // "<10 digits>." removed
      auto& slot = newestPerNode[node];
      if (slot == nullptr || slot->stampUs < p.stampUs) slot = &p;
    }
    std::vector<Pending> held;
    for (const auto& kv : newestPerNode) held.push_back(*kv.second);
    for (const Pending& p : held) {
      pending_.erase(p);
      queued_.erase(p.path);
      systemStamps_.erase(p.stampUs);
    }
  }

  // Step-timer events up to what the files delivered so far (all of them once the files are done).
  void readStepTimes(MetricBatch& out) {
    const int64_t horizon = pending_.empty() ? std::numeric_limits<int64_t>::max() : readUpTo_;
    for (auto& [path, f] : stepFiles_) {
      if (f.next >= f.buffered.size()) {
        f.buffered.clear();
        f.next = 0;
        std::ifstream in(path, std::ios::binary);
        if (!in) continue;
        in.seekg(static_cast<std::streamoff>(f.offset));
        std::string chunk(1 << 20, '\0');
        in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        chunk.resize(static_cast<size_t>(in.gcount()));
        f.offset += chunk.size();
        std::string text = f.partial + chunk;
        const size_t cut = text.rfind('\n');
        if (cut == std::string::npos) {
          f.partial = text;
          continue;
        }
        f.partial = text.substr(cut + 1);
        text.resize(cut + 1);
        f.buffered = profiler::parseStepTimesText(text);
      }
      while (f.next < f.buffered.size() && f.buffered[f.next].startUs <= horizon) {
        out.events.push_back(toEvent(f.buffered[f.next]));
        maxTimeUs_ = std::max(maxTimeUs_, f.buffered[f.next].startUs);
        ++f.next;
      }
    }
  }

  std::string root_;
  FileSourceOptions options_;
  std::set<Pending> pending_;
  std::set<std::string> consumed_, queued_;
  std::set<int64_t> systemStamps_, traceStamps_;
  std::map<std::string, StepFile> stepFiles_;
  bool useStepTimer_ = false;
  bool endMarker_ = false;
  int64_t readUpTo_ = std::numeric_limits<int64_t>::min();
  int64_t maxTimeUs_ = std::numeric_limits<int64_t>::min();
};

}  // namespace

std::unique_ptr<MetricSource> makeProfilerSource(const std::string& runDir, const FileSourceOptions& options) {
  const std::string root = profiler::resolveProfilerRoot(runDir);
  std::error_code ec;
  if (!fs::is_directory(fs::path(root) / "system", ec) && !fs::is_directory(fs::path(root) / "framework", ec) &&
      !fs::is_directory(fs::path(root) / "steps", ec))
    return nullptr;
  return std::make_unique<ProfilerMetricSource>(root, options);
}

}  // namespace strata::rules
