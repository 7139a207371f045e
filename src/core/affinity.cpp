#include "core/affinity.h"

#include <algorithm>
#include <thread>

namespace strata {

cpu_set_t ownCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    const int n = std::min<int>(CPU_SETSIZE, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    for (int i = 0; i < n; ++i) CPU_SET(i, &set);
  }
  return set;
}

int ownCpuCount() {
  const cpu_set_t set = ownCpus();
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace strata
