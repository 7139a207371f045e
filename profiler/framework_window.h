// When the detailed timeline is recorded: SageMaker's FrameworkProfile, a step range
// [start_step, start_step + num_steps) or a wall-clock range [start_unix_time,
// start_unix_time + duration). Pure and thread-safe.
//
// Step ranges: the timeline is on from stepBegin(start_step) and stays on in the gaps
// between window steps (data loading for the next step happens there), until
// stepEnd(start_step + num_steps - 1). With start_step 0 it is on from the start.
// Time ranges: on whenever the clock is inside the range.
#pragma once

#include <cstdint>
#include <optional>

#include "config/config.h"

namespace strata::profiler {

class FrameworkWindow {
 public:
  // No profile: never on.
  static FrameworkWindow from(const std::optional<config::FrameworkProfile>& profile);

  bool configured() const { return kind_ != Kind::kNone; }
  // Before any step.
  bool activeAtStart(int64_t nowUs) const;
  bool activeAtStepBegin(int64_t step, int64_t nowUs) const;
  // Between stepEnd(step) and the next stepBegin.
  bool activeAfterStepEnd(int64_t step, int64_t nowUs) const;
  // Time windows open and close with the clock alone (the writer re-evaluates them on
  // its ticks); step windows change only at step boundaries.
  bool byTime() const { return kind_ == Kind::kTime; }
  bool activeAtTime(int64_t nowUs) const { return kind_ == Kind::kTime && inTime(nowUs); }

 private:
  enum class Kind { kNone, kSteps, kTime };
  bool inSteps(int64_t step) const { return step >= startStep_ && step < endStep_; }
  bool inTime(int64_t nowUs) const { return nowUs >= startUs_ && nowUs < endUs_; }

  Kind kind_ = Kind::kNone;
  int64_t startStep_ = 0, endStep_ = 0;  // [start, end)
  int64_t startUs_ = 0, endUs_ = 0;      // [start, end)
};

}  // namespace strata::profiler
