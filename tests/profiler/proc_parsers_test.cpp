// Pure /proc parsers and rates on fixture snapshots (tests/profiler/fixtures/proc/),
// including counters that wrap at 2^32 and counters that restart from zero.
#include <gtest/gtest.h>

#include "profiler/proc_parsers.h"
#include "profiler_test_util.h"

namespace strata::profiler {
namespace {

using testing::fixturePath;
using testing::readFile;

std::string proc(const std::string& name) { return readFile(fixturePath("proc/" + name)); }

TEST(CounterDelta, GrowsWrapsAndResets) {
  const CounterDelta plain = counterDelta(100, 250);
  EXPECT_EQ(plain.value, 150u);
  EXPECT_FALSE(plain.wrapped || plain.reset);

  const CounterDelta wrap = counterDelta(4294967000ull, 200);  // 32-bit counter passed 2^32
  EXPECT_TRUE(wrap.wrapped);
  EXPECT_EQ(wrap.value, 296u + 200u);

  const CounterDelta reset = counterDelta(5000000, 1000);  // far from the top: restarted
  EXPECT_TRUE(reset.reset);
  EXPECT_EQ(reset.value, 1000u);

  const CounterDelta reset64 = counterDelta(uint64_t{1} << 40, 7);  // 64-bit: never a wrap
  EXPECT_TRUE(reset64.reset);
  EXPECT_EQ(reset64.value, 7u);
}

TEST(ProcStat, ParsesPerCoreJiffiesAndSkipsTheTotalLine) {
  const CpuSnapshot snap = parseProcStat(proc("stat_t0.txt"));
  ASSERT_EQ(snap.cores.size(), 4u);
  EXPECT_EQ(snap.cores.at(0).user, 2500u);
  EXPECT_EQ(snap.cores.at(1).softirq, 13u);
  EXPECT_EQ(snap.cores.at(3).iowait, 250u);
  EXPECT_TRUE(parseProcStat("garbage\ncpuX 1 2 3\ncpu0 1 2\n").empty());
}

TEST(ProcStat, UtilisationAndIowaitFromDeltas) {
  const auto usage =
      computeCpuUsage(parseProcStat(proc("stat_t0.txt")), parseProcStat(proc("stat_t1.txt")));
  ASSERT_EQ(usage.size(), 4u);
  // cpu0: busy 40 of 50 jiffies, iowait 5; cpu1 idle; cpu2 busy 25, iowait 5; cpu3 busy.
  EXPECT_DOUBLE_EQ(usage[0].utilizationPct, 80.0);
  EXPECT_DOUBLE_EQ(usage[0].iowaitPct, 10.0);
  EXPECT_DOUBLE_EQ(usage[1].utilizationPct, 0.0);
  EXPECT_DOUBLE_EQ(usage[2].utilizationPct, 50.0);
  EXPECT_DOUBLE_EQ(usage[2].iowaitPct, 10.0);
  EXPECT_DOUBLE_EQ(usage[3].utilizationPct, 100.0);
  EXPECT_EQ(usage[3].core, 3);
}

TEST(ProcStat, HotplugResetCountsFromZeroAndOfflineCoresAreSkipped) {
  // cpu1 went offline; cpu3 came back with counters restarted from zero.
  const auto usage = computeCpuUsage(parseProcStat(proc("stat_t1.txt")),
                                     parseProcStat(proc("stat_hotplug.txt")));
  ASSERT_EQ(usage.size(), 3u);
  EXPECT_EQ(usage[0].core, 0);
  EXPECT_DOUBLE_EQ(usage[1].utilizationPct, 0.0);  // cpu2 did not move: 0%, not NaN
  EXPECT_EQ(usage[2].core, 3);
  EXPECT_DOUBLE_EQ(usage[2].utilizationPct, 60.0);  // 30 busy of 50 since the restart
  EXPECT_DOUBLE_EQ(usage[2].iowaitPct, 10.0);
  for (const CpuUsage& u : usage) {
    EXPECT_GE(u.utilizationPct, 0.0);
    EXPECT_LE(u.utilizationPct, 100.0);
  }
}

TEST(Meminfo, UsedPercentFromAvailableOrFallback) {
  EXPECT_DOUBLE_EQ(*memoryUsedPercent(parseMeminfo(proc("meminfo.txt"))), 25.0);
  // No MemAvailable: free + buffers + cached = 4e6 of 8e6 kB.
  EXPECT_DOUBLE_EQ(*memoryUsedPercent(parseMeminfo(proc("meminfo_no_available.txt"))), 50.0);
  EXPECT_FALSE(memoryUsedPercent(parseMeminfo("MemFree: 10 kB\n")).has_value());
  EXPECT_EQ(parseMeminfo(proc("meminfo.txt")).at("HugePages_Total"), 0u);
}

TEST(Diskstats, WholeDiskNames) {
  for (const char* disk : {"sda", "vdb", "xvda", "hdc", "nvme0n1", "nvme1n2", "mmcblk0"})
    EXPECT_TRUE(isWholeDisk(disk)) << disk;
  for (const char* notDisk :
       {"sda1", "vdb2", "xvda1", "nvme0n1p1", "mmcblk0p2", "loop0", "ram1", "zram0", "dm-0",
        "md127", "sr0", ""})
    EXPECT_FALSE(isWholeDisk(notDisk)) << notDisk;
}

TEST(Diskstats, ThroughputCountsWholeDisksOnly) {
  const DiskSnapshot t0 = parseDiskstats(proc("diskstats_t0.txt"));
  ASSERT_EQ(t0.size(), 6u);
  EXPECT_EQ(t0.at("sda").sectorsWritten, 160000u);
  const DiskThroughput d = computeDiskThroughput(t0, parseDiskstats(proc("diskstats_t1.txt")), 0.5);
  // sda: 10 reads + 20 writes, 1 MiB read, 2 MiB written; nvme0n1: 40 + 30 ops, 4 MiB read.
  // loop0, sda1, nvme0n1p1 and dm-0 moved too and must not be counted.
  EXPECT_DOUBLE_EQ(d.iops, 200.0);
  EXPECT_DOUBLE_EQ(d.readBytesPerSecond, 5.0 * 1024 * 1024 * 2);
  EXPECT_DOUBLE_EQ(d.writeBytesPerSecond, 2.0 * 1024 * 1024 * 2);
  EXPECT_DOUBLE_EQ(computeDiskThroughput(t0, t0, 0).iops, 0.0);
}

TEST(Diskstats, ThirtyTwoBitSectorCounterWraps) {
  const DiskThroughput d = computeDiskThroughput(parseDiskstats(proc("diskstats_wrap_t0.txt")),
                                                 parseDiskstats(proc("diskstats_wrap_t1.txt")), 1.0);
  EXPECT_DOUBLE_EQ(d.readBytesPerSecond, 2048.0 * 512);  // not ~2^32 sectors, not 0
  EXPECT_DOUBLE_EQ(d.iops, 30.0);
}

TEST(NetDev, ThroughputSkipsLoopback) {
  const NetSnapshot t0 = parseNetDev(proc("net_dev_t0.txt"));
  ASSERT_EQ(t0.size(), 3u);  // the two header lines are not interfaces
  EXPECT_EQ(t0.at("eth0").txBytes, 2000000u);
  const NetThroughput n = computeNetThroughput(t0, parseNetDev(proc("net_dev_t1.txt")), 0.5);
  EXPECT_DOUBLE_EQ(n.receiveBytesPerSecond, 2000000.0);
  EXPECT_DOUBLE_EQ(n.transmitBytesPerSecond, 1000000.0);
}

TEST(NetDev, WrapAndResetAreNotHugeSpikes) {
  // eth0 rx wrapped at 2^32 (+250000); ib0 was re-created (counters restarted: 1000 / 500).
  const NetThroughput n = computeNetThroughput(parseNetDev(proc("net_dev_wrap_t0.txt")),
                                               parseNetDev(proc("net_dev_wrap_t1.txt")), 1.0);
  EXPECT_DOUBLE_EQ(n.receiveBytesPerSecond, 250000.0 + 1000.0);
  EXPECT_DOUBLE_EQ(n.transmitBytesPerSecond, 125000.0 + 500.0);
}

}  // namespace
}  // namespace strata::profiler
