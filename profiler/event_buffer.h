// A rank's pending timeline events and step records, filled by any thread and drained by
// the session's writer thread. push holds a mutex for one vector append (no I/O); drain
// swaps the vectors out, so the writer never holds the lock while writing. Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "profiler/timeline_event.h"

namespace strata::profiler {

class EventBuffer {
 public:
  // At most maxPending events wait at once; beyond that they are dropped and counted,
  // so a stalled disk costs memory up to a bound, never a blocked training thread.
  // Reaching highWater pending events asks for an early drain.
  EventBuffer(size_t maxPending, size_t highWater)
      : maxPending_(maxPending), highWater_(highWater) {}

  enum class Push { kAccepted, kAcceptedWakeWriter, kDropped };
  // kAcceptedWakeWriter exactly when this push reached highWater; kDropped (and one more
  // drop counted) when full.
  Push push(TimelineEvent&& event);
  bool pushStep(const StepRecord& step);
  // Moves everything pending into *events and *steps (which are cleared first).
  void drain(std::vector<TimelineEvent>* events, std::vector<StepRecord>* steps);
  // Discards everything pending.
  void clear();

  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  const size_t maxPending_;
  const size_t highWater_;
  std::mutex mu_;
  std::vector<TimelineEvent> events_;
  std::vector<StepRecord> steps_;
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace strata::profiler
