// Text reports of a trial for `strata trial` (pure formatting over the Trial API; the
// command only parses arguments and prints). Not thread-safe (reads the Trial).
#pragma once

#include <cstddef>
#include <string>

#include "debugger/trial.h"

namespace strata::debugger {

struct TrialReportOptions {
  std::string collection;  // only tensors of this collection (empty: all)
  bool allModes = true;    // steps of every mode; else only `mode`
  Mode mode = Mode::kGlobal;
  std::string worker;      // values of this worker (empty: each worker)
  size_t maxValues = 8;    // elements printed per value
};

// Workers, completeness, steps per mode, and every tensor with its step count.
std::string trialSummary(const Trial& trial, const TrialReportOptions& options);
// Every step: global step, mode, mode step, workers, complete or not.
std::string trialSteps(const Trial& trial);
// One tensor at every step: dtype, shape, leading values, min/max/mean, stored reductions.
// Throws TensorUnavailable for an unknown name.
std::string tensorReport(const Trial& trial, const std::string& name, const TrialReportOptions& options);

// "[1.5, -2, 3, ... (12 values)]": the first `maxValues` elements.
std::string formatValues(const TensorData& tensor, size_t maxValues);

}  // namespace strata::debugger
