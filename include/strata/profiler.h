// Your own ranges in the profiler timeline.
//
//   void loadBatch() {
//     STRATA_PROFILE("load batch");        // from here to the end of the scope
//     ...
//   }
//   {
//     strata::profiler::Range range("augment");  // the same, as a named object
//     ...
//   }
//
// Ranges land in this rank's timeline (<output_dir>/profiler-output/framework/...,
// phase "UserRange", on a track per thread named after the thread), only while framework
// profiling is on (the job config's profiler.framework_profile window). Otherwise a range
// costs one relaxed atomic load and a branch. Ranges of one thread nest like scopes; open
// and close a range on the same thread. Thread-safe; never throws (the string overload
// may throw std::bad_alloc while profiling is on); never blocks on I/O.
// `strata trace RUN_DIR -o merged.json` merges all ranks' timelines for Perfetto
// (ui.perfetto.dev) or chrome://tracing.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace strata::profiler {

namespace detail {
extern std::atomic<bool> gRangesOn;  // a session is current and its timeline is on
int64_t rangeBegin() noexcept;        // start time in µs, or -1 when not recording
void rangeEnd(const char* name, int64_t startUs) noexcept;
}  // namespace detail

class Range {
 public:
  // `name` must outlive the range (a string literal does).
  explicit Range(const char* name) noexcept
      : name_(name),
        startUs_(detail::gRangesOn.load(std::memory_order_relaxed) ? detail::rangeBegin() : -1) {}
  // Copies the name, only while profiling is on.
  explicit Range(const std::string& name)
      : name_(nullptr),
        startUs_(detail::gRangesOn.load(std::memory_order_relaxed) ? detail::rangeBegin() : -1) {
    if (startUs_ >= 0) owned_ = name;
  }
  ~Range() {
    if (startUs_ >= 0) detail::rangeEnd(name_ != nullptr ? name_ : owned_.c_str(), startUs_);
  }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  const char* name_;
  std::string owned_;
  int64_t startUs_;
};

}  // namespace strata::profiler

#define STRATA_PROFILE_CONCAT_INNER_(a, b) a##b
#define STRATA_PROFILE_CONCAT_(a, b) STRATA_PROFILE_CONCAT_INNER_(a, b)
// A profiler::Range from here to the end of the enclosing scope.
#define STRATA_PROFILE(name) \
  ::strata::profiler::Range STRATA_PROFILE_CONCAT_(strataProfileRange_, __LINE__)(name)
