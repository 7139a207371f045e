// NVML through dlopen. We declare the six functions we call ourselves (their C ABI has
// been stable since NVML 5.319), so building needs no CUDA or driver headers.
#include <dlfcn.h>

#include "core/logging.h"
#include "profiler/gpu_source.h"

namespace strata::profiler {
namespace {

using NvmlReturn = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlSuccess = 0;
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct NvmlApi {
  NvmlReturn (*init)();
  NvmlReturn (*shutdown)();
  NvmlReturn (*deviceCount)(unsigned int*);
  NvmlReturn (*deviceByIndex)(unsigned int, NvmlDevice*);
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*);
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*);
};

class NoGpuSource final : public GpuSource {
 public:
  explicit NoGpuSource(const std::string& why) {
    STRATA_LOG(kInfo, kProf, "system monitor: no GPUs (", why, "); GPU metrics are not recorded");
  }
  std::vector<GpuReading> read() override { return {}; }
};

class NvmlGpuSource final : public GpuSource {
 public:
  // devices: (NVML index, handle) pairs.
  NvmlGpuSource(void* lib, NvmlApi api, std::vector<std::pair<int, NvmlDevice>> devices)
      : lib_(lib), api_(api), devices_(std::move(devices)) {}
  ~NvmlGpuSource() override {
    api_.shutdown();
    dlclose(lib_);
  }

  std::vector<GpuReading> read() override {
    std::vector<GpuReading> out;
    for (const auto& [index, device] : devices_) {
      NvmlUtilization util{};
      NvmlMemory mem{};
      if (api_.utilization(device, &util) != kNvmlSuccess) continue;
      if (api_.memory(device, &mem) != kNvmlSuccess) continue;
      GpuReading r;
      r.index = index;
      r.utilizationPct = util.gpu;
      r.memoryUtilizationPct =
          mem.total > 0 ? 100.0 * static_cast<double>(mem.used) / static_cast<double>(mem.total)
                        : 0.0;
      out.push_back(r);
    }
    return out;
  }

 private:
  void* lib_;
  NvmlApi api_;
  std::vector<std::pair<int, NvmlDevice>> devices_;
};

template <typename Fn>
bool loadSymbol(void* lib, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  return *out != nullptr;
}

}  // namespace

std::unique_ptr<GpuSource> makeNvmlGpuSource(const char* libraryName) {
  void* lib = dlopen(libraryName, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return std::make_unique<NoGpuSource>(std::string(libraryName) + " not found");
  NvmlApi api{};
  const bool ok = loadSymbol(lib, "nvmlInit_v2", &api.init) &&
                  loadSymbol(lib, "nvmlShutdown", &api.shutdown) &&
                  loadSymbol(lib, "nvmlDeviceGetCount_v2", &api.deviceCount) &&
                  loadSymbol(lib, "nvmlDeviceGetHandleByIndex_v2", &api.deviceByIndex) &&
                  loadSymbol(lib, "nvmlDeviceGetUtilizationRates", &api.utilization) &&
                  loadSymbol(lib, "nvmlDeviceGetMemoryInfo", &api.memory);
  if (!ok) {
    dlclose(lib);
    return std::make_unique<NoGpuSource>("NVML symbols missing");
  }
  if (api.init() != kNvmlSuccess) {
    dlclose(lib);
    return std::make_unique<NoGpuSource>("nvmlInit failed");
  }
  unsigned int count = 0;
  std::vector<std::pair<int, NvmlDevice>> devices;
  if (api.deviceCount(&count) == kNvmlSuccess) {
    for (unsigned int i = 0; i < count; ++i) {
      NvmlDevice dev = nullptr;
      if (api.deviceByIndex(i, &dev) == kNvmlSuccess) devices.emplace_back(static_cast<int>(i), dev);
    }
  }
  if (devices.empty()) {
    api.shutdown();
    dlclose(lib);
    return std::make_unique<NoGpuSource>("NVML found no device");
  }
  STRATA_LOG(kInfo, kProf, "system monitor: ", devices.size(), " GPU(s) through NVML");
  return std::make_unique<NvmlGpuSource>(lib, api, std::move(devices));
}

}  // namespace strata::profiler
