// One system-metric sample as smdebug's readers expect it (specs/smdebug.md §2.1, §8.12):
// JSON lines with Type, Name, Dimension, Value, NodeId, Timestamp (float epoch seconds),
// and the exact names the rules match on:
//
//   Type     Name                                Dimension
//   cpu      cpu0..cpuN                          CPUUtilization, I/OWaitPercentage
//   gpu      gpu0..gpuN                          GPUUtilization, GPUMemoryUtilization
//   memory   MemoryUsedPercent                   ""
//   i/o      IOPS, ReadThroughputInBytesPerSecond, WriteThroughputInBytesPerSecond   ""
//   network  ReceiveBytesPerSecond, TransmitBytesPerSecond                 Algorithm
//
// Every metric of one sample carries the identical Timestamp: the CPU rules sum cores by
// exactly equal timestamps and group a "snapshot" within 20 ms. Pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "profiler/proc_parsers.h"

namespace strata::profiler {

struct SystemMetric {
  std::string type;
  std::string name;
  std::string dimension;
  double value = 0;
};

struct GpuReading {
  int index = 0;
  double utilizationPct = 0;        // NVML utilization.gpu
  double memoryUtilizationPct = 0;  // used / total memory * 100
};

// One reading of every /proc file the monitor uses; a file that could not be read or
// parsed is nullopt and its metrics are left out of the sample.
struct ProcSnapshot {
  int64_t timestampUs = 0;
  std::optional<CpuSnapshot> cpu;
  std::optional<MemInfo> mem;
  std::optional<DiskSnapshot> disk;
  std::optional<NetSnapshot> net;
};

// The metrics of the interval prev -> cur, in the order: per core (CPUUtilization,
// I/OWaitPercentage), per GPU (GPUUtilization, GPUMemoryUtilization), MemoryUsedPercent
// (from cur alone), IOPS, read and write throughput, receive and transmit throughput.
std::vector<SystemMetric> buildSystemMetrics(const ProcSnapshot& prev, const ProcSnapshot& cur,
                                             const std::vector<GpuReading>& gpus);

// {"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":4.76,
//  "NodeId":"algo-1","Timestamp":1591748109.232195}  (no newline). Values are printed with
// 2 decimals (as SageMaker's agent does), the timestamp with 6 (µs).
std::string formatSystemMetricLine(const SystemMetric& metric, const std::string& nodeId,
                                   int64_t timestampUs);

}  // namespace strata::profiler
