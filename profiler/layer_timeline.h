// Pure timing decisions of the framework timeline's per-layer and per-bucket slices
// (src/adapter/observe/layer_instrumentation.cpp gathers the timestamps and records the slices).
//
// Backward per layer. libtorch runs a Sequential's backward layer by layer in reverse, and
// a tensor hook on a layer's output fires when the gradient with respect to that output
// arrives: the moment that layer's backward starts, which is also the moment the next
// layer's (i + 1's) backward ended. The first differentiable layer has no hooked input
// (the batch does not require a gradient): its backward ends when the last gradient of
// its own parameters has been accumulated.
//
// AllReduce per bucket. Buckets run one after another on the group's communication thread
// in launch order (a FIFO queue), so each one starts when it was launched or when the one
// before it finished, whichever is later, and runs for its measured run time.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace strata::profiler {

struct TimedRange {
  int64_t startUs = 0;
  int64_t durUs = 0;
  int64_t endUs() const { return startUs + durUs; }
  bool operator==(const TimedRange& o) const { return startUs == o.startUs && durUs == o.durUs; }
};

struct LayerInterval {
  size_t layer = 0;
  TimedRange interval;
  bool operator==(const LayerInterval& o) const { return layer == o.layer && interval == o.interval; }
};

struct BackwardSlices {
  std::vector<LayerInterval> layers;  // in execution order: last layer first
  std::optional<TimedRange> whole;      // from the first layer's start to the last one's end
};

// outputGradUs[i]: when the gradient with respect to layer i's output arrived, or -1 (the
// output needs no gradient: layer i and those before it run no backward). firstDoneUs: when
// the first differentiable layer's backward ended (-1: unknown, that layer is left out).
// Durations are clamped at 0 (timestamps of one clock, but hooks may fire in the same µs).
BackwardSlices backwardSlices(const std::vector<int64_t>& outputGradUs, int64_t firstDoneUs);

struct CommRun {
  int64_t launchUs = 0;  // when the operation was queued
  int64_t runUs = 0;     // how long it ran on the communication thread
};

// The intervals the runs occupied on a FIFO communication thread (see above), never ending
// after `notAfterUs` (when the caller saw them all complete). Consecutive intervals never
// overlap, so they nest strictly on one track.
std::vector<TimedRange> fifoRunIntervals(const std::vector<CommRun>& runs, int64_t notAfterUs);

}  // namespace strata::profiler
