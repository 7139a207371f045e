#include "profiler/event_buffer.h"

namespace strata::profiler {

EventBuffer::Push EventBuffer::push(TimelineEvent&& event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (events_.size() < maxPending_) {
      events_.push_back(std::move(event));
      return events_.size() == highWater_ ? Push::kAcceptedWakeWriter : Push::kAccepted;
    }
  }
  dropped_.fetch_add(1, std::memory_order_relaxed);
  return Push::kDropped;
}

bool EventBuffer::pushStep(const StepRecord& step) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (steps_.size() < maxPending_) {
      steps_.push_back(step);
      return true;
    }
  }
  dropped_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void EventBuffer::drain(std::vector<TimelineEvent>* events, std::vector<StepRecord>* steps) {
  events->clear();
  steps->clear();
  std::lock_guard<std::mutex> lock(mu_);
  events->swap(events_);
  steps->swap(steps_);
}

void EventBuffer::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  events_.clear();
  steps_.clear();
}

}  // namespace strata::profiler
