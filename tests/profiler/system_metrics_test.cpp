// System metrics: the lines smdebug's readers need (names, NodeId, identical timestamps),
// file naming, the monitor against a golden file, and robustness (unreadable /proc, no NVML).
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>

#include "profiler/gpu_source.h"
#include "profiler/layout.h"
#include "profiler/system_monitor.h"
#include "profiler/system_reader.h"
#include "profiler_test_util.h"

namespace strata::profiler {
namespace {

using testing::fixturePath;
using testing::readFile;
using testing::TempDir;

// 2023-11-14T22:13:20Z
constexpr int64_t kT0Us = 1700000000000000;

class FakeGpus final : public GpuSource {
 public:
  std::vector<GpuReading> read() override { return {{0, 87.0, 42.5}, {1, 3.0, 10.25}}; }
};

// Serves /proc files from fixtures: snapshot `*phase` of each file.
ReadTextFn fixtureProc(const int* phase, std::set<std::string> unreadable = {}) {
  return [phase, unreadable](const std::string& path) -> std::optional<std::string> {
    static const std::map<std::string, std::vector<std::string>> kFiles = {
        {"/proc/stat", {"stat_t0.txt", "stat_t1.txt"}},
        {"/proc/meminfo", {"meminfo.txt", "meminfo.txt"}},
        {"/proc/diskstats", {"diskstats_t0.txt", "diskstats_t1.txt"}},
        {"/proc/net/dev", {"net_dev_t0.txt", "net_dev_t1.txt"}}};
    if (unreadable.count(path) || !kFiles.count(path)) return std::nullopt;
    return readFile(fixturePath("proc/" + kFiles.at(path).at(*phase)));
  };
}

SystemMonitorOptions monitorOptions(const std::string& root, std::shared_ptr<ManualClock> clock,
                                    const int* phase, std::set<std::string> unreadable = {}) {
  SystemMonitorOptions opts;
  opts.profilerRoot = root;
  opts.hostIndex = 0;
  opts.clock = std::move(clock);
  opts.readText = fixtureProc(phase, std::move(unreadable));
  opts.gpus = std::make_unique<FakeGpus>();
  return opts;
}

TEST(SystemMetrics, LineFormatIsSmdebugs) {
  EXPECT_EQ(formatSystemMetricLine({"cpu", "cpu5", "CPUUtilization", 1.355}, "algo-1",
                                   1591748109232195),
            "{\"Type\":\"cpu\",\"Name\":\"cpu5\",\"Dimension\":\"CPUUtilization\",\"Value\":1.35,"
            "\"NodeId\":\"algo-1\",\"Timestamp\":1591748109.232195}");
  EXPECT_EQ(formatSystemMetricLine({"memory", "MemoryUsedPercent", "", 25}, "algo-2", kT0Us + 5),
            "{\"Type\":\"memory\",\"Name\":\"MemoryUsedPercent\",\"Dimension\":\"\",\"Value\":25.00,"
            "\"NodeId\":\"algo-2\",\"Timestamp\":1700000000.000005}");
}

TEST(SystemMetrics, FileNamesPassSmdebugsValidityRegex) {
  // 22:13:45 falls in the minute starting 22:13:00 = 1699999980.
  const std::string rel = systemMetricsRelPath(kT0Us + 25'000'000, 2);
  EXPECT_EQ(rel, "system/incremental/2023111422/1699999980.algo-3.json");
  const std::regex smdebugGate(R"(.+/system/.+/(\d{10}).algo-\d+.json)");
  EXPECT_TRUE(std::regex_match("/run/profiler-output/" + rel, smdebugGate));
  EXPECT_EQ(systemFileStampSeconds("/x/" + rel), 1699999980);
  EXPECT_FALSE(systemFileStampSeconds("/x/system/1699999980.algo-1.json"));  // no subfolder
  EXPECT_FALSE(systemFileStampSeconds("/x/system/a/169999998.algo-1.json"));  // 9 digits
  EXPECT_EQ(hostNodeId(0), "algo-1");
  EXPECT_EQ(utcHourDir(kT0Us), "2023111422");
}

TEST(SystemMetrics, BuildsEveryMetricWithExactNames) {
  int phase = 0;
  const auto read = fixtureProc(&phase);
  ProcSnapshot prev{kT0Us, parseProcStat(*read("/proc/stat")), parseMeminfo(*read("/proc/meminfo")),
                    parseDiskstats(*read("/proc/diskstats")), parseNetDev(*read("/proc/net/dev"))};
  phase = 1;
  ProcSnapshot cur{kT0Us + 500000, parseProcStat(*read("/proc/stat")),
                   parseMeminfo(*read("/proc/meminfo")), parseDiskstats(*read("/proc/diskstats")),
                   parseNetDev(*read("/proc/net/dev"))};
  const auto metrics = buildSystemMetrics(prev, cur, FakeGpus().read());
  std::vector<std::string> keys;
  for (const auto& m : metrics) keys.push_back(m.type + "|" + m.name + "|" + m.dimension);
  const std::vector<std::string> expected = {
      "cpu|cpu0|CPUUtilization", "cpu|cpu0|I/OWaitPercentage", "cpu|cpu1|CPUUtilization",
      "cpu|cpu1|I/OWaitPercentage", "cpu|cpu2|CPUUtilization", "cpu|cpu2|I/OWaitPercentage",
      "cpu|cpu3|CPUUtilization", "cpu|cpu3|I/OWaitPercentage", "gpu|gpu0|GPUUtilization",
      "gpu|gpu0|GPUMemoryUtilization", "gpu|gpu1|GPUUtilization", "gpu|gpu1|GPUMemoryUtilization",
      "memory|MemoryUsedPercent|", "i/o|IOPS|", "i/o|ReadThroughputInBytesPerSecond|",
      "i/o|WriteThroughputInBytesPerSecond|", "network|ReceiveBytesPerSecond|Algorithm",
      "network|TransmitBytesPerSecond|Algorithm"};
  EXPECT_EQ(keys, expected);
  EXPECT_DOUBLE_EQ(metrics[0].value, 80.0);
  EXPECT_DOUBLE_EQ(metrics[12].value, 25.0);
  EXPECT_DOUBLE_EQ(metrics[13].value, 200.0);
  EXPECT_DOUBLE_EQ(metrics[16].value, 2000000.0);
}

TEST(SystemMonitor, WritesTheGoldenFile) {
  TempDir dir;
  int phase = 0;
  auto clock = std::make_shared<ManualClock>(kT0Us);
  SystemMonitor monitor(monitorOptions(dir.str(), clock, &phase));
  EXPECT_EQ(monitor.sampleOnce(), 0u);  // baseline only
  phase = 1;
  clock->advance(500000);
  EXPECT_EQ(monitor.sampleOnce(), 18u);
  const auto file = dir.path() / "system/incremental/2023111422/1699999980.algo-1.json";
  ASSERT_TRUE(std::filesystem::exists(file));
  const std::string text = readFile(file);
  testing::expectMatchesGolden(text, "system_metrics.algo-1.json");

  // All 18 lines of the sample share one Timestamp, and smdebug's reader keys all parse.
  size_t bad = 7;
  const auto events = parseSystemMetricsText(text, &bad);
  EXPECT_EQ(bad, 0u);
  ASSERT_EQ(events.size(), 18u);
  for (const auto& e : events) {
    EXPECT_EQ(e.timestampUs, kT0Us + 500000);
    EXPECT_EQ(e.nodeId, "algo-1");
  }
}

TEST(SystemMonitor, NewFileEveryMinute) {
  TempDir dir;
  int phase = 0;
  auto clock = std::make_shared<ManualClock>(kT0Us);
  SystemMonitor monitor(monitorOptions(dir.str(), clock, &phase));
  monitor.sampleOnce();
  phase = 1;
  clock->advance(30'000'000);  // 22:13:50
  monitor.sampleOnce();
  clock->advance(30'000'000);  // 22:14:20: next minute
  monitor.sampleOnce();
  SystemMetricsReader reader(dir.str());
  EXPECT_EQ(reader.fileStampsUs(),
            (std::vector<int64_t>{1699999980'000000, 1700000040'000000}));
}

TEST(SystemMonitor, UnreadableProcFileIsSkippedAndSamplingGoesOn) {
  TempDir dir;
  int phase = 0;
  auto clock = std::make_shared<ManualClock>(kT0Us);
  SystemMonitor monitor(monitorOptions(dir.str(), clock, &phase, {"/proc/stat"}));
  monitor.sampleOnce();
  phase = 1;
  clock->advance(500000);
  EXPECT_EQ(monitor.sampleOnce(), 10u);  // 18 minus the 8 cpu lines
  clock->advance(500000);
  EXPECT_EQ(monitor.sampleOnce(), 10u);  // and again: warned once, still sampling
}

TEST(SystemMonitor, UnwritableOutputNeverThrows) {
  TempDir dir;
  testing::writeFile(dir.path() / "system", "a file where a folder should be");
  int phase = 0;
  auto clock = std::make_shared<ManualClock>(kT0Us);
  SystemMonitor monitor(monitorOptions(dir.str(), clock, &phase));
  monitor.sampleOnce();
  phase = 1;
  EXPECT_EQ(monitor.sampleOnce(), 0u);
}

TEST(Nvml, MissingLibraryMeansNoGpusNotAnError) {
  auto gpus = makeNvmlGpuSource("libnvidia-ml-does-not-exist.so.1");
  ASSERT_NE(gpus, nullptr);
  EXPECT_TRUE(gpus->read().empty());
}

}  // namespace
}  // namespace strata::profiler
