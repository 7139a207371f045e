#include "profiler/layout.h"

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <regex>

namespace strata::profiler {
namespace {

constexpr int64_t kSecondsPerMinute = 60;

int64_t floorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

std::string_view baseName(std::string_view path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string profilerRoot(const std::string& outputDir) {
  return (std::filesystem::path(outputDir) / kProfilerDirName).string();
}

std::string resolveProfilerRoot(const std::string& runDir) {
  std::error_code ec;
  const auto nested = std::filesystem::path(runDir) / kProfilerDirName;
  if (std::filesystem::is_directory(nested, ec)) return nested.string();
  return runDir;
}

std::string hostNodeId(int hostIndex) { return "algo-" + std::to_string(hostIndex + 1); }

std::string rankNodeId(int rank, int hostIndex) {
  return std::to_string(rank) + "-" + hostNodeId(hostIndex);
}

std::string utcHourDir(int64_t epochUs) {
  const std::time_t seconds = static_cast<std::time_t>(floorDiv(epochUs, kUsPerSecond));
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  // Sized for any int fields (GCC's -Wformat-truncation cannot bound tm's members).
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%04d%02d%02d%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour);
  return buf;
}

std::string systemMetricsRelPath(int64_t epochUs, int hostIndex) {
  const int64_t minute =
      floorDiv(floorDiv(epochUs, kUsPerSecond), kSecondsPerMinute) * kSecondsPerMinute;
  char name[32];
  std::snprintf(name, sizeof(name), "%010lld", static_cast<long long>(minute));
  return "system/incremental/" + utcHourDir(minute * kUsPerSecond) + "/" + name + "." +
         hostNodeId(hostIndex) + ".json";
}

std::string traceRelPath(int64_t lastEndUs, const std::string& nodeId) {
  return "framework/pevents/" + utcHourDir(lastEndUs) + "/" + std::to_string(lastEndUs) + "_" +
         nodeId + "_pythontimeline.json";
}

std::string openTraceRelPath(const std::string& nodeId) {
  return "framework/" + nodeId + "_pythontimeline.json.tmp";
}

std::string stepTimesRelPath(const std::string& nodeId) {
  return "steps/" + nodeId + "_steps.jsonl";
}

std::optional<int64_t> systemFileStampSeconds(std::string_view path) {
  static const std::regex kSystemFile(R"(.+/system/.+/(\d{10}).algo-\d+.json)");
  std::cmatch m;
  if (!std::regex_match(path.data(), path.data() + path.size(), m, kSystemFile))
    return std::nullopt;
  return std::stoll(m[1].str());
}

std::optional<TraceFileName> parseTraceFileName(std::string_view path) {
  const std::string_view name = baseName(path);
  if (path.find("pevents") == std::string_view::npos) return std::nullopt;
  if (name.size() < 5 || name.substr(name.size() - 5) != ".json") return std::nullopt;
  const size_t first = name.find('_');
  if (first == std::string_view::npos) return std::nullopt;
  const size_t second = name.find('_', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  TraceFileName out;
  try {
    size_t used = 0;
    out.stampUs = std::stoll(std::string(name.substr(0, first)), &used);
    if (used != first) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  out.nodeId = std::string(name.substr(first + 1, second - first - 1));
  out.suffix = std::string(name.substr(second + 1));
  return out;
}

std::string normalizeNodeId(const std::string& nodeId) {
  static const std::regex kRankAlgo("(.*)-(algo.*)");
  std::smatch m;
  if (std::regex_match(nodeId, m, kRankAlgo)) return m[2].str() + "-" + m[1].str();
  return nodeId;
}

int rankOfNodeId(const std::string& nodeId) {
  const size_t dash = nodeId.find("-algo-");
  if (dash == std::string::npos || dash == 0) return -1;
  try {
    size_t used = 0;
    const int rank = std::stoi(nodeId.substr(0, dash), &used);
    return used == dash ? rank : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace strata::profiler
