#include "profiler/system_metrics.h"

#include <cmath>
#include <cstdio>

#include "profiler/json_util.h"
#include "profiler/layout.h"

namespace strata::profiler {
namespace {


void addCpu(const ProcSnapshot& prev, const ProcSnapshot& cur, std::vector<SystemMetric>& out) {
  if (!prev.cpu || !cur.cpu) return;
  for (const CpuUsage& u : computeCpuUsage(*prev.cpu, *cur.cpu)) {
    const std::string name = "cpu" + std::to_string(u.core);
    out.push_back({"cpu", name, "CPUUtilization", u.utilizationPct});
    out.push_back({"cpu", name, "I/OWaitPercentage", u.iowaitPct});
  }
}

void addGpus(const std::vector<GpuReading>& gpus, std::vector<SystemMetric>& out) {
  for (const GpuReading& g : gpus) {
    const std::string name = "gpu" + std::to_string(g.index);
    out.push_back({"gpu", name, "GPUUtilization", g.utilizationPct});
    out.push_back({"gpu", name, "GPUMemoryUtilization", g.memoryUtilizationPct});
  }
}

void addRates(const ProcSnapshot& prev, const ProcSnapshot& cur, std::vector<SystemMetric>& out) {
  const double dt = static_cast<double>(cur.timestampUs - prev.timestampUs) / static_cast<double>(kUsPerSecond);
  if (prev.disk && cur.disk) {
    const DiskThroughput d = computeDiskThroughput(*prev.disk, *cur.disk, dt);
    out.push_back({"i/o", "IOPS", "", d.iops});
    out.push_back({"i/o", "ReadThroughputInBytesPerSecond", "", d.readBytesPerSecond});
    out.push_back({"i/o", "WriteThroughputInBytesPerSecond", "", d.writeBytesPerSecond});
  }
  if (prev.net && cur.net) {
    const NetThroughput n = computeNetThroughput(*prev.net, *cur.net, dt);
    out.push_back({"network", "ReceiveBytesPerSecond", "Algorithm", n.receiveBytesPerSecond});
    out.push_back({"network", "TransmitBytesPerSecond", "Algorithm", n.transmitBytesPerSecond});
  }
}

}  // namespace

std::vector<SystemMetric> buildSystemMetrics(const ProcSnapshot& prev, const ProcSnapshot& cur,
                                             const std::vector<GpuReading>& gpus) {
  std::vector<SystemMetric> out;
  addCpu(prev, cur, out);
  addGpus(gpus, out);
  if (cur.mem) {
    if (const auto pct = memoryUsedPercent(*cur.mem))
      out.push_back({"memory", "MemoryUsedPercent", "", *pct});
  }
  addRates(prev, cur, out);
  return out;
}

std::string formatSystemMetricLine(const SystemMetric& metric, const std::string& nodeId,
                                   int64_t timestampUs) {
  const double value = std::isfinite(metric.value) ? metric.value : 0.0;
  char numbers[96];
  const long long seconds = timestampUs / 1000000;
  const long long micros = timestampUs % 1000000;
  std::snprintf(numbers, sizeof(numbers), "\"Value\":%.2f,", value);
  std::string line = "{\"Type\":" + jsonQuote(metric.type) +
                     ",\"Name\":" + jsonQuote(metric.name) +
                     ",\"Dimension\":" + jsonQuote(metric.dimension) + "," + numbers;
  std::snprintf(numbers, sizeof(numbers), ",\"Timestamp\":%lld.%06lld}", seconds, micros);
  line += "\"NodeId\":" + jsonQuote(nodeId) + numbers;
  return line;
}

}  // namespace strata::profiler
