// Which mode a DistributedModel step has and how steps are numbered: smdebug's hook model
// (specs/smdebug.md §1.8), where each top-level forward is one step, the global step counts
// every mode's steps and each mode counts its own from 0. Pure; not thread-safe (one
// training thread owns a counter).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "strata/types.h"

namespace strata::adapter {

// The mode chosen with set_mode(), else TRAIN while the module trains and EVAL otherwise.
inline Mode observedMode(std::optional<Mode> chosen, bool training) {
  if (chosen) return *chosen;
  return training ? Mode::kTrain : Mode::kEval;
}

// A forward outside step() is a step of its own when the model evaluates or predicts (a
// training forward outside step() belongs to no step: the user drives backward and the
// optimizer without step(), which reports nothing).
inline bool forwardIsItsOwnStep(bool insideStep, Mode mode) { return !insideStep && mode != Mode::kTrain; }

class StepCounter {
 public:
  struct Numbers {
    int64_t global = 0;
    int64_t modeStep = 0;
  };
  // The numbers of the next step of `mode`.
  Numbers next(Mode mode) {
    Numbers n{global_++, perMode_[index(mode)]++};
    return n;
  }
  // Resuming from a checkpoint after `trainSteps` training steps (evaluation steps before
  // the checkpoint are not counted).
  void resume(int64_t trainSteps) {
    global_ = trainSteps;
    perMode_ = {trainSteps, 0, 0, 0};
  }

 private:
  static size_t index(Mode mode) { return static_cast<size_t>(mode) - 1; }
  int64_t global_ = 0;
  std::array<int64_t, 4> perMode_{0, 0, 0, 0};
};

}  // namespace strata::adapter
