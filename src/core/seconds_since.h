#pragma once
// Elapsed wall time in seconds on the monotonic clock, for the executor's and the profiler's
// own measurements (not the timeline's, which records microseconds since the epoch).
#include <chrono>

namespace strata {

inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace strata
