// Per-GPU utilisation and memory readings for the system monitor.
#pragma once

#include <memory>
#include <vector>

#include "profiler/system_metrics.h"

namespace strata::profiler {

// One caller thread at a time (the sampler thread).
class GpuSource {
 public:
  virtual ~GpuSource() = default;
  // One reading per GPU, index ascending; empty when there are no GPUs. Never throws.
  virtual std::vector<GpuReading> read() = 0;
};

// NVML loaded at run time with dlopen (no link-time dependency on the driver). When the
// library or its symbols are missing, nvmlInit fails or no device is found, it logs
// "no GPUs" once at INFO (never a warning: most of our machines have none) and read()
// returns nothing. A device whose query fails is left out of that reading.
std::unique_ptr<GpuSource> makeNvmlGpuSource(const char* libraryName = "libnvidia-ml.so.1");

}  // namespace strata::profiler
