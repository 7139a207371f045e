// Pure parsers for the /proc files the system monitor samples, and the pure functions
// that turn two snapshots into rates. No I/O: the sampler reads the text, these parse it
// (tests feed fixtures from tests/profiler/fixtures/).
//
// Kernel counters only grow, except when they wrap (32-bit fields on 32-bit kernels,
// /proc/net/dev and /proc/diskstats) or restart from zero (a network interface or disk
// re-created, a CPU hot-plugged). counterDelta tells the two apart; see its comment.
// Malformed lines are skipped, never thrown on. All functions are thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::profiler {

// --- counters ----------------------------------------------------------------------
struct CounterDelta {
  uint64_t value = 0;
  bool wrapped = false;  // a 32-bit counter passed 2^32 - 1
  bool reset = false;    // the counter restarted from zero; value = cur (since restart)
};
// cur >= prev: plain difference. cur < prev: a wrap when both fit in 32 bits and the
// modular difference is under 2^31 (a wrap is only plausible when prev was near the top),
// else a reset, where everything counted since the restart (cur) is the best estimate.
CounterDelta counterDelta(uint64_t prev, uint64_t cur);

// --- /proc/stat --------------------------------------------------------------------
struct CpuTimes {  // jiffies; guest and guest_nice are already inside user and nice
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0,
           steal = 0;
};
struct CpuSnapshot {
  std::map<int, CpuTimes> cores;  // by N of "cpuN"; offline cores are absent
  bool empty() const { return cores.empty(); }
};
CpuSnapshot parseProcStat(std::string_view text);

struct CpuUsage {
  int core = 0;
  double utilizationPct = 0;  // busy = total - idle - iowait (psutil's definition), 0..100
  double iowaitPct = 0;       // 0..100
};
// Cores present in both snapshots, ascending. A core whose counters did not move has 0%.
std::vector<CpuUsage> computeCpuUsage(const CpuSnapshot& prev, const CpuSnapshot& cur);

// --- /proc/meminfo -----------------------------------------------------------------
using MemInfo = std::map<std::string, uint64_t, std::less<>>;  // "MemTotal" -> kB
MemInfo parseMeminfo(std::string_view text);
// 100 * (MemTotal - MemAvailable) / MemTotal (psutil's percent); without MemAvailable
// (kernels before 3.14) available = MemFree + Buffers + Cached. nullopt without MemTotal.
std::optional<double> memoryUsedPercent(const MemInfo& info);

// --- /proc/diskstats ---------------------------------------------------------------
struct DiskCounters {
  uint64_t readsCompleted = 0, sectorsRead = 0, writesCompleted = 0, sectorsWritten = 0;
};
using DiskSnapshot = std::map<std::string, DiskCounters>;  // device name -> counters
DiskSnapshot parseDiskstats(std::string_view text);
// Whole physical disks only, so partitions and stacked devices are not counted twice:
// rejects loop*, ram*, zram*, dm-*, md*, sr*, fd* and partitions (sda1, vdb2, xvda1,
// hda3, nvme0n1p1, mmcblk0p2).
bool isWholeDisk(std::string_view name);

struct DiskThroughput {
  double iops = 0;  // reads + writes completed per second
  double readBytesPerSecond = 0;
  double writeBytesPerSecond = 0;
};
// Sums whole disks present in both snapshots. Sectors are 512 bytes in diskstats
// whatever the device's sector size. dtSeconds <= 0 gives zeros.
DiskThroughput computeDiskThroughput(const DiskSnapshot& prev, const DiskSnapshot& cur,
                                     double dtSeconds);

// --- /proc/net/dev -----------------------------------------------------------------
struct NetCounters {
  uint64_t rxBytes = 0, txBytes = 0;
};
using NetSnapshot = std::map<std::string, NetCounters>;  // interface -> counters
NetSnapshot parseNetDev(std::string_view text);

struct NetThroughput {
  double receiveBytesPerSecond = 0;
  double transmitBytesPerSecond = 0;
};
// Sums interfaces other than "lo" present in both snapshots. dtSeconds <= 0 gives zeros.
NetThroughput computeNetThroughput(const NetSnapshot& prev, const NetSnapshot& cur,
                                   double dtSeconds);

}  // namespace strata::profiler
