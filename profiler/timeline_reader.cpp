#include "profiler/timeline_reader.h"

#include <algorithm>
#include <filesystem>

#include "core/logging.h"
#include "profiler/json_util.h"
#include "profiler/layout.h"
#include "profiler/system_monitor.h"
#include "profiler/system_reader.h"

namespace strata::profiler {
namespace {

namespace fs = std::filesystem;
constexpr char kOpenSuffix[] = "_pythontimeline.json.tmp";

int64_t intField(const nlohmann::json& o, const char* key, int64_t fallback) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_number()) return fallback;
  return it->is_number_float() ? static_cast<int64_t>(it->get<double>()) : it->get<int64_t>();
}

// Parsing state of one file: metadata seen so far and open B events per pid.
class TraceParser {
 public:
  TraceParser(const std::string& nodeId, const std::string& fileType)
      : nodeId_(normalizeNodeId(nodeId)), rank_(rankOfNodeId(nodeId)), fileType_(fileType) {}

  void read(const nlohmann::json& e) {
    const std::string ph = e.value("ph", "");
    if (ph == "M") readMetadata(e);
    else if (ph == "X") addEvent(e, intField(e, "ts", 0), intField(e, "dur", 0));
    else if (ph == "B") open_[intField(e, "pid", 0)].push_back(e);
    else if (ph == "E") closeEvent(e);
  }
  TraceFileContents& out() { return out_; }

 private:
  void readMetadata(const nlohmann::json& e) {
    const int pid = static_cast<int>(intField(e, "pid", 0));
    const nlohmann::json args = e.value("args", nlohmann::json::object());
    const std::string name = e.value("name", "");
    if (name == "process_name") {
      if (args.contains("name") && args["name"].is_string()) out_.processNames[pid] = args["name"];
      if (!out_.baseUs && args.contains("start_time_since_epoch_in_micros"))
        out_.baseUs = intField(args, "start_time_since_epoch_in_micros", 0);
    } else if (name == "thread_name" && args.contains("name") && args["name"].is_string()) {
      out_.threadNames[{pid, static_cast<int>(intField(e, "tid", 0))}] = args["name"];
    }
  }

  void closeEvent(const nlohmann::json& e) {
    auto& stack = open_[intField(e, "pid", 0)];
    if (stack.empty()) return;  // an E without B (smdebug logs and skips it)
    const nlohmann::json b = std::move(stack.back());
    stack.pop_back();
    const int64_t start = intField(b, "ts", 0);
    const int64_t end = intField(e, "ts", start);
    if (end < start) return;
    nlohmann::json merged = b;
    if (e.contains("args") && e["args"].is_object()) merged["args"] = e["args"];
    addEvent(merged, start, end - start);
  }

  void addEvent(const nlohmann::json& e, int64_t ts, int64_t dur) {
    TraceEvent t;
    t.name = e.value("name", "");
    t.pid = static_cast<int>(intField(e, "pid", 0));
    t.tid = static_cast<int>(intField(e, "tid", 0));
    const auto phase = out_.processNames.find(t.pid);
    t.phase = phase != out_.processNames.end() ? phase->second : "Unknown";
    t.startUs = ts + out_.baseUs.value_or(0);
    t.durUs = dur;
    t.endUs = t.startUs + dur;
    t.nodeId = nodeId_;
    t.rank = rank_;
    t.fileType = fileType_;
    t.args = e.contains("args") && e["args"].is_object() ? e["args"] : nlohmann::json::object();
    out_.events.push_back(std::move(t));
  }

  const std::string nodeId_;
  const int rank_;
  const std::string fileType_;
  TraceFileContents out_;
  std::map<int64_t, std::vector<nlohmann::json>> open_;
};

bool nodeMatches(const std::string& want, const TraceEvent& e, const std::string& rawNode) {
  return want.empty() || want == e.nodeId || want == rawNode;
}

}  // namespace

std::optional<int64_t> TraceEvent::stepNum() const {
  const auto it = args.find("step_num");
  if (it == args.end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_string()) return std::nullopt;
  try {
    size_t used = 0;
    const std::string s = it->get<std::string>();
    const int64_t v = std::stoll(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::string traceFileType(const std::string& suffix) {
  if (suffix.find("pythontimeline") != std::string::npos) return "PythontimelineMetrics";
  if (suffix.find("model_timeline") != std::string::npos) return "DetailedframeworkMetrics";
  if (suffix.find("smdataparallel_timeline") != std::string::npos) return "SMDataParallelMetrics";
  return "";
}

TraceFileContents parseTraceText(const std::string& text, const std::string& nodeId,
                                 const std::string& fileType) {
  ParsedObjects parsed = parseJsonArrayTolerant(text);
  TraceParser parser(nodeId, fileType);
  for (const nlohmann::json& e : parsed.objects) parser.read(e);
  TraceFileContents out = std::move(parser.out());
  out.badLines = parsed.badLines;
  out.complete = parsed.badLines == 0 && !text.empty() &&
                 text.find_last_not_of(" \r\n\t") != std::string::npos &&
                 text[text.find_last_not_of(" \r\n\t")] == ']';
  return out;
}

std::vector<TraceFile> listTraceFiles(const std::string& profilerRoot, bool includeOpenFiles) {
  std::vector<TraceFile> files;
  std::error_code ec;
  const fs::path dir = fs::path(profilerRoot) / "framework";
  if (!fs::is_directory(dir, ec)) return files;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string path = it->path().string();
    const std::string base = it->path().filename().string();
    if (const auto name = parseTraceFileName(path)) {
      files.push_back({path, name->stampUs, name->nodeId, traceFileType(name->suffix), false});
    } else if (includeOpenFiles && base.size() > sizeof(kOpenSuffix) - 1 &&
               base.compare(base.size() - (sizeof(kOpenSuffix) - 1), std::string::npos,
                            kOpenSuffix) == 0) {
      const std::string node = base.substr(0, base.size() - (sizeof(kOpenSuffix) - 1));
      files.push_back({path, std::numeric_limits<int64_t>::max(), node,
                       "PythontimelineMetrics", true});
    }
  }
  std::sort(files.begin(), files.end(), [](const TraceFile& a, const TraceFile& b) {
    return a.stampUs != b.stampUs ? a.stampUs < b.stampUs : a.path < b.path;
  });
  return files;
}

TimelineReader::TimelineReader(std::string profilerRoot, bool includeOpenFiles)
    : root_(std::move(profilerRoot)), includeOpen_(includeOpenFiles) {
  refresh();
}

void TimelineReader::refresh() { files_ = listTraceFiles(root_, includeOpen_); }

std::vector<int64_t> TimelineReader::fileStampsUs() const {
  std::vector<int64_t> stamps;
  for (const TraceFile& f : files_)
    if (!f.open) stamps.push_back(f.stampUs);
  return stamps;
}

std::vector<TraceEvent> TimelineReader::events(const TraceQuery& q) {
  std::vector<TraceEvent> out;
  const int64_t bufferUs = std::chrono::microseconds(kFileSelectionBuffer).count();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t hi = q.endUs > kMax - bufferUs ? kMax : q.endUs + bufferUs;
  const int64_t lo = q.startUs < kMin + bufferUs ? kMin : q.startUs - bufferUs;
  bool passedEnd = false;
  for (const TraceFile& f : files_) {
    // Our stamps are the largest end in the file; smdebug's are the last one written, so
    // keep its buffer before start too.
    if (f.stampUs < lo) continue;
    if (passedEnd && !f.open) continue;
    if (f.stampUs >= hi) passedEnd = true;
    const auto text = readTextFile(f.path);
    if (!text) continue;
    TraceFileContents contents = parseTraceText(*text, f.nodeId, f.fileType);
    badLines_ += contents.badLines;
    for (TraceEvent& e : contents.events) {
      if (e.endUs < q.startUs || q.endUs < e.startUs) continue;
      if (!nodeMatches(q.nodeId, e, f.nodeId) || (q.rank >= 0 && e.rank != q.rank)) continue;
      if (!q.phase.empty() && e.phase != q.phase) continue;
      if (!q.nameContains.empty() && e.name.find(q.nameContains) == std::string::npos) continue;
      out.push_back(std::move(e));
    }
  }
  return out;
}

}  // namespace strata::profiler
