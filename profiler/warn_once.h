// "Warn once, keep going": the profiler's own failures must never fail or flood the job.
#pragma once

#include <mutex>
#include <set>
#include <string>
#include <string_view>

namespace strata::profiler {

// Remembers which failure keys were already reported. Thread-safe.
class WarnOnce {
 public:
  // True the first time `key` is seen (the caller then logs), false afterwards.
  bool first(std::string_view key) {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_.emplace(key).second;
  }

 private:
  std::mutex mu_;
  std::set<std::string, std::less<>> seen_;
};

}  // namespace strata::profiler
