#include "profiler/system_reader.h"

#include <cmath>
#include <filesystem>
#include <set>

#include "core/logging.h"
#include "profiler/json_util.h"
#include "profiler/layout.h"
#include "profiler/system_monitor.h"

namespace strata::profiler {
namespace {

namespace fs = std::filesystem;

bool matches(const std::string& want, const std::string& have) {
  return want.empty() || want == have;
}

}  // namespace

std::vector<SystemEvent> parseSystemMetricsText(const std::string& text, size_t* badLines,
                                                bool* lastLineTorn) {
  ParsedObjects parsed = parseJsonLines(text);
  if (lastLineTorn != nullptr) *lastLineTorn = parsed.lastLineBad;
  size_t bad = parsed.badLines;
  std::vector<SystemEvent> out;
  out.reserve(parsed.objects.size());
  for (const nlohmann::json& o : parsed.objects) {
    const auto str = [&](const char* key) { return o.at(key).get<std::string>(); };
    try {
      SystemEvent e;
      e.type = str("Type");
      e.dimension = str("Dimension");
      e.nodeId = str("NodeId");
      if (o.contains("Name")) e.name = str("Name");
      e.value = o.at("Value").get<double>();
      e.timestampS = o.at("Timestamp").get<double>();
      e.timestampUs = std::llround(e.timestampS * kUsPerSecond);
      out.push_back(std::move(e));
    } catch (const nlohmann::json::exception&) {
      ++bad;
    }
  }
  if (badLines != nullptr) *badLines = bad;
  return out;
}

SystemMetricsReader::SystemMetricsReader(std::string profilerRoot)
    : root_(std::move(profilerRoot)) {
  refresh();
}

void SystemMetricsReader::refresh() {
  files_.clear();
  std::error_code ec;
  const fs::path dir = fs::path(root_) / "system";
  if (!fs::is_directory(dir, ec)) return;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string path = it->path().string();
    if (const auto stamp = systemFileStampSeconds(path)) files_.emplace(*stamp * kUsPerSecond, path);
  }
}

const std::vector<SystemEvent>& SystemMetricsReader::load(const std::string& path) {
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(path, ec);
  CachedFile& cached = cache_[path];
  if (!ec && bytes == cached.bytes && !cached.events.empty()) return cached.events;
  cached = CachedFile{};
  const auto text = readTextFile(path);
  if (!text) return cached.events;
  cached.bytes = bytes;
  bool torn = false;
  cached.events = parseSystemMetricsText(*text, &cached.badLines, &torn);
  // A torn last line is a file being written, not damage.
  if (torn && cached.badLines > 0) --cached.badLines;
  if (cached.badLines > 0)
    STRATA_LOG(kWarn, kProf, path, ": skipped ", cached.badLines, " malformed line(s)");
  badLines_ += cached.badLines;
  return cached.events;
}

std::vector<SystemEvent> SystemMetricsReader::events(const SystemQuery& q) {
  std::vector<SystemEvent> out;
  if (files_.empty()) return out;
  const int64_t bufferUs = std::chrono::microseconds(kFileSelectionBuffer).count();
  const int64_t lo = q.startUs == std::numeric_limits<int64_t>::min() ? q.startUs : q.startUs - bufferUs;
  const int64_t hi = q.endUs == std::numeric_limits<int64_t>::max() ? q.endUs : q.endUs + bufferUs;
  // The largest stamp <= lo (or the first file), through the first stamp >= hi.
  auto first = files_.upper_bound(lo);
  if (first != files_.begin()) first = std::prev(first);
  for (auto it = first; it != files_.end(); ++it) {
    for (const SystemEvent& e : load(it->second)) {
      if (e.timestampUs < q.startUs || e.timestampUs > q.endUs) continue;
      if (!matches(q.type, e.type) || !matches(q.nodeId, e.nodeId) ||
          !matches(q.dimension, e.dimension) || !matches(q.name, e.name))
        continue;
      out.push_back(e);
    }
    if (it->first >= hi) break;
  }
  return out;
}

std::vector<int64_t> SystemMetricsReader::fileStampsUs() const {
  std::vector<int64_t> stamps;
  for (const auto& [stamp, path] : files_) stamps.push_back(stamp);
  return stamps;
}

std::vector<std::string> SystemMetricsReader::nodes() const {
  std::set<std::string> nodes;
  for (const auto& [path, file] : cache_)
    for (const SystemEvent& e : file.events) nodes.insert(e.nodeId);
  return {nodes.begin(), nodes.end()};
}

}  // namespace strata::profiler
