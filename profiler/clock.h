// The profiler's one time source: microseconds since the Unix epoch.
//
// Which clock: the wall clock (CLOCK_REALTIME) is read ONCE per process to anchor the
// epoch, and every later reading advances with the monotonic clock (CLOCK_MONOTONIC):
//   nowUs() = anchorSystemUs + (steadyNow - anchorSteady)
// So durations never jump when NTP steps the wall clock mid-run, and timestamps are still
// epoch-based, as smdebug needs (system metric `Timestamp` in float seconds, trace
// `start_time_since_epoch_in_micros` in µs). Ranks on different hosts agree to the
// accuracy of their NTP sync at anchor time; a measured per-rank offset can be added
// (OffsetClock) to align them further.
//
// Tests inject a ManualClock so writers produce byte-identical (golden) output.
// All classes here are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

namespace strata::profiler {

class Clock {
 public:
  virtual ~Clock() = default;
  // Microseconds since 1970-01-01T00:00:00Z. Never throws.
  virtual int64_t nowUs() const noexcept = 0;
};

// The process clock described above (shared by every session of the process).
const std::shared_ptr<const Clock>& processClock();

// Adds a fixed offset (e.g. this rank's measured skew against rank 0) to another clock.
class OffsetClock final : public Clock {
 public:
  OffsetClock(std::shared_ptr<const Clock> base, std::chrono::microseconds offset)
      : base_(std::move(base)), offsetUs_(offset.count()) {}
  int64_t nowUs() const noexcept override { return base_->nowUs() + offsetUs_; }

 private:
  std::shared_ptr<const Clock> base_;
  int64_t offsetUs_;
};

// A clock that moves only when told to (tests).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t startUs) : nowUs_(startUs) {}
  int64_t nowUs() const noexcept override { return nowUs_.load(std::memory_order_acquire); }
  void set(int64_t us) { nowUs_.store(us, std::memory_order_release); }
  void advance(int64_t us) { nowUs_.fetch_add(us, std::memory_order_acq_rel); }

 private:
  std::atomic<int64_t> nowUs_;
};

}  // namespace strata::profiler
