#include "profiler/layer_timeline.h"

#include <algorithm>

namespace strata::profiler {

BackwardSlices backwardSlices(const std::vector<int64_t>& outputGradUs, int64_t firstDoneUs) {
  BackwardSlices out;
  for (size_t i = outputGradUs.size(); i-- > 0;) {
    const int64_t start = outputGradUs[i];
    if (start < 0) continue;
    // Layer i's backward ends when it has produced the gradient of its input, which is layer
    // i - 1's output; without a hooked input it is the first differentiable layer.
    const bool inputHooked = i > 0 && outputGradUs[i - 1] >= 0;
    const int64_t end = inputHooked ? outputGradUs[i - 1] : firstDoneUs;
    if (end < 0) continue;
    out.layers.push_back({i, {start, std::max<int64_t>(0, end - start)}});
  }
  if (!out.layers.empty()) {
    int64_t start = out.layers.front().interval.startUs, end = start;
    for (const auto& l : out.layers) {
      start = std::min(start, l.interval.startUs);
      end = std::max(end, l.interval.endUs());
    }
    out.whole = TimedRange{start, end - start};
  }
  return out;
}

std::vector<TimedRange> fifoRunIntervals(const std::vector<CommRun>& runs, int64_t notAfterUs) {
  std::vector<TimedRange> out;
  out.reserve(runs.size());
  int64_t free = INT64_MIN;  // when the communication thread became free
  for (const CommRun& r : runs) {
    int64_t start = std::max(r.launchUs, free);
    int64_t end = start + std::max<int64_t>(0, r.runUs);
    if (end > notAfterUs) {  // clock granularity: never past the moment we saw completion
      end = std::max(notAfterUs, start);
      start = std::min(start, end);
    }
    out.push_back({start, end - start});
    free = end;
  }
  return out;
}

}  // namespace strata::profiler
