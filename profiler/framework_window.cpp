#include "profiler/framework_window.h"

#include <chrono>

namespace strata::profiler {

FrameworkWindow FrameworkWindow::from(const std::optional<config::FrameworkProfile>& profile) {
  FrameworkWindow w;
  if (!profile) return w;
  if (profile->byTime()) {
    w.kind_ = Kind::kTime;
    w.startUs_ = std::chrono::duration_cast<std::chrono::microseconds>(*profile->startUnixTime)
                     .count();
    const auto duration = profile->duration.value_or(std::chrono::duration<double>(0));
    w.endUs_ = w.startUs_ + static_cast<int64_t>(duration.count() * 1e6);
  } else {
    w.kind_ = Kind::kSteps;
    w.startStep_ = profile->startStep;
    w.endStep_ = profile->startStep + profile->numSteps;
  }
  return w;
}

bool FrameworkWindow::activeAtStart(int64_t nowUs) const { return activeAfterStepEnd(-1, nowUs); }

bool FrameworkWindow::activeAtStepBegin(int64_t step, int64_t nowUs) const {
  switch (kind_) {
    case Kind::kNone: return false;
    case Kind::kSteps: return inSteps(step);
    case Kind::kTime: return inTime(nowUs);
  }
  return false;
}

bool FrameworkWindow::activeAfterStepEnd(int64_t step, int64_t nowUs) const {
  switch (kind_) {
    case Kind::kNone: return false;
    case Kind::kSteps: return inSteps(step + 1);
    case Kind::kTime: return inTime(nowUs);
  }
  return false;
}

}  // namespace strata::profiler
