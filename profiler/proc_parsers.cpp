#include "profiler/proc_parsers.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace strata::profiler {
namespace {

constexpr uint64_t kTwoPow32 = uint64_t{1} << 32;
// A wrap is believed only when the modular difference is under half the 32-bit range;
// a larger one means the counter restarted rather than wrapped.
constexpr uint64_t kMaxWrapDelta = uint64_t{1} << 31;
// /proc/diskstats counts 512-byte sectors whatever the device's own sector size.
constexpr double kDiskstatsSectorBytes = 512;

// Calls fn(line) for every line of text.
template <typename Fn>
void forEachLine(std::string_view text, Fn&& fn) {
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    fn(text.substr(0, eol));
    if (eol == std::string_view::npos) break;
    text.remove_prefix(eol + 1);
  }
}

std::vector<std::string_view> splitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    const size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

bool parseU64(std::string_view text, uint64_t* out) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// Parses fields[first, first + count) as numbers; false if any is missing or malformed.
bool parseNumbers(const std::vector<std::string_view>& fields, size_t first, size_t count,
                  uint64_t* out) {
  if (fields.size() < first + count) return false;
  for (size_t i = 0; i < count; ++i)
    if (!parseU64(fields[first + i], &out[i])) return false;
  return true;
}

uint64_t delta(uint64_t prev, uint64_t cur) { return counterDelta(prev, cur).value; }

bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool isDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

CounterDelta counterDelta(uint64_t prev, uint64_t cur) {
  if (cur >= prev) return {cur - prev, false, false};
  if (prev < kTwoPow32) {
    const uint64_t modular = kTwoPow32 - prev + cur;
    if (modular < kMaxWrapDelta) return {modular, true, false};
  }
  return {cur, false, true};
}

// --- /proc/stat --------------------------------------------------------------------

CpuSnapshot parseProcStat(std::string_view text) {
  CpuSnapshot snap;
  forEachLine(text, [&](std::string_view line) {
    if (!startsWith(line, "cpu") || line.size() < 4 || !isDigit(line[3])) return;
    const auto fields = splitFields(line);
    int core = 0;
    const std::string_view id = fields[0].substr(3);
    const auto [ptr, ec] = std::from_chars(id.data(), id.data() + id.size(), core);
    if (ec != std::errc() || ptr != id.data() + id.size()) return;
    // Kernels before 2.6.11 lack steal; treat missing trailing fields as zero.
    uint64_t v[8] = {};
    const size_t have = std::min<size_t>(8, fields.size() - 1);
    if (have < 4 || !parseNumbers(fields, 1, have, v)) return;
    snap.cores[core] = CpuTimes{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
  });
  return snap;
}

std::vector<CpuUsage> computeCpuUsage(const CpuSnapshot& prev, const CpuSnapshot& cur) {
  std::vector<CpuUsage> usage;
  for (const auto& [core, c] : cur.cores) {
    const auto it = prev.cores.find(core);
    if (it == prev.cores.end()) continue;
    const CpuTimes& p = it->second;
    const uint64_t idle = delta(p.idle, c.idle);
    const uint64_t iowait = delta(p.iowait, c.iowait);
    const uint64_t busy = delta(p.user, c.user) + delta(p.nice, c.nice) +
                          delta(p.system, c.system) + delta(p.irq, c.irq) +
                          delta(p.softirq, c.softirq) + delta(p.steal, c.steal);
    const uint64_t total = busy + idle + iowait;
    CpuUsage u;
    u.core = core;
    if (total > 0) {
      u.utilizationPct = 100.0 * static_cast<double>(busy) / static_cast<double>(total);
      u.iowaitPct = 100.0 * static_cast<double>(iowait) / static_cast<double>(total);
    }
    usage.push_back(u);
  }
  return usage;
}

// --- /proc/meminfo -----------------------------------------------------------------

MemInfo parseMeminfo(std::string_view text) {
  MemInfo info;
  forEachLine(text, [&](std::string_view line) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return;
    const auto fields = splitFields(line.substr(colon + 1));
    uint64_t kb = 0;
    if (fields.empty() || !parseU64(fields[0], &kb)) return;
    info.emplace(std::string(line.substr(0, colon)), kb);
  });
  return info;
}

std::optional<double> memoryUsedPercent(const MemInfo& info) {
  const auto get = [&](std::string_view key) -> std::optional<uint64_t> {
    const auto it = info.find(key);
    if (it == info.end()) return std::nullopt;
    return it->second;
  };
  const auto total = get("MemTotal");
  if (!total || *total == 0) return std::nullopt;
  uint64_t available = 0;
  if (const auto a = get("MemAvailable")) {
    available = *a;
  } else {
    available = get("MemFree").value_or(0) + get("Buffers").value_or(0) +
                get("Cached").value_or(0);
  }
  available = std::min(available, *total);
  return 100.0 * static_cast<double>(*total - available) / static_cast<double>(*total);
}

// --- /proc/diskstats ---------------------------------------------------------------

DiskSnapshot parseDiskstats(std::string_view text) {
  DiskSnapshot snap;
  forEachLine(text, [&](std::string_view line) {
    const auto fields = splitFields(line);
    // major minor name, then at least 11 counters (kernel 2.6+).
    uint64_t v[7] = {};
    if (fields.size() < 14 || !parseNumbers(fields, 3, 7, v)) return;
    snap[std::string(fields[2])] = DiskCounters{v[0], v[2], v[4], v[6]};
  });
  return snap;
}

bool isWholeDisk(std::string_view name) {
  static constexpr std::string_view kVirtualPrefixes[] = {"loop", "ram", "zram", "dm-",
                                                          "md",   "sr",  "fd"};
  if (name.empty()) return false;
  for (std::string_view prefix : kVirtualPrefixes)
    if (startsWith(name, prefix)) return false;
  // nvme0n1 / mmcblk0 are disks, nvme0n1p1 / mmcblk0p1 their partitions.
  if (startsWith(name, "nvme") || startsWith(name, "mmcblk")) {
    const size_t p = name.rfind('p');
    return !(p != std::string_view::npos && p + 1 < name.size() && p > 4 &&
             std::all_of(name.begin() + p + 1, name.end(), isDigit));
  }
  // sda, vdb, xvda, hdc: a trailing number means a partition.
  return !isDigit(name.back());
}

DiskThroughput computeDiskThroughput(const DiskSnapshot& prev, const DiskSnapshot& cur,
                                     double dtSeconds) {
  DiskThroughput out;
  if (dtSeconds <= 0) return out;
  uint64_t ops = 0, sectorsRead = 0, sectorsWritten = 0;
  for (const auto& [name, c] : cur) {
    const auto it = prev.find(name);
    if (it == prev.end() || !isWholeDisk(name)) continue;
    const DiskCounters& p = it->second;
    ops += delta(p.readsCompleted, c.readsCompleted) + delta(p.writesCompleted, c.writesCompleted);
    sectorsRead += delta(p.sectorsRead, c.sectorsRead);
    sectorsWritten += delta(p.sectorsWritten, c.sectorsWritten);
  }
  out.iops = static_cast<double>(ops) / dtSeconds;
  out.readBytesPerSecond = static_cast<double>(sectorsRead) * kDiskstatsSectorBytes / dtSeconds;
  out.writeBytesPerSecond =
      static_cast<double>(sectorsWritten) * kDiskstatsSectorBytes / dtSeconds;
  return out;
}

// --- /proc/net/dev -----------------------------------------------------------------

NetSnapshot parseNetDev(std::string_view text) {
  NetSnapshot snap;
  forEachLine(text, [&](std::string_view line) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return;
    const auto nameFields = splitFields(line.substr(0, colon));
    if (nameFields.size() != 1 || nameFields[0].find('|') != std::string_view::npos) return;
    const auto fields = splitFields(line.substr(colon + 1));
    uint64_t rx = 0, tx = 0;
    if (fields.size() < 9 || !parseU64(fields[0], &rx) || !parseU64(fields[8], &tx)) return;
    snap[std::string(nameFields[0])] = NetCounters{rx, tx};
  });
  return snap;
}

NetThroughput computeNetThroughput(const NetSnapshot& prev, const NetSnapshot& cur,
                                   double dtSeconds) {
  NetThroughput out;
  if (dtSeconds <= 0) return out;
  uint64_t rx = 0, tx = 0;
  for (const auto& [name, c] : cur) {
    const auto it = prev.find(name);
    if (it == prev.end() || name == "lo") continue;
    rx += delta(it->second.rxBytes, c.rxBytes);
    tx += delta(it->second.txBytes, c.txBytes);
  }
  out.receiveBytesPerSecond = static_cast<double>(rx) / dtSeconds;
  out.transmitBytesPerSecond = static_cast<double>(tx) / dtSeconds;
  return out;
}

}  // namespace strata::profiler
