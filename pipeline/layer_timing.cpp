#include "pipeline/layer_timing.h"

#include <algorithm>

#include "core/errors.h"

namespace strata::pipeline {

double medianSeconds(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

namespace {

std::vector<double> afterWarmup(const std::vector<double>& runs, int warmup) {
  const auto skip = static_cast<size_t>(std::max(0, warmup));
  return skip >= runs.size() ? std::vector<double>()
                             : std::vector<double>(runs.begin() + static_cast<long>(skip), runs.end());
}

}  // namespace

LayerTimes layerTimesFromSamples(const LayerTimingSamples& samples, int warmup, const std::string& layer) {
  const size_t runs = samples.forwardSeconds.size();
  STRATA_CHECK(samples.backwardSeconds.size() == runs, "layer profile of \"", layer, "\": ", runs,
               " forward times but ", samples.backwardSeconds.size(), " backward times");
  STRATA_CHECK(samples.weightGradientSeconds.empty() || samples.weightGradientSeconds.size() == runs,
               "layer profile of \"", layer, "\": ", runs, " forward times but ", samples.weightGradientSeconds.size(),
               " weight-gradient times");
  STRATA_CHECK(runs > static_cast<size_t>(std::max(0, warmup)), "layer profile of \"", layer, "\": ", runs,
               " timed run(s), none left after ", warmup, " warm-up run(s)");
  LayerTimes t;
  const std::vector<double> forward = afterWarmup(samples.forwardSeconds, warmup);
  t.samples = static_cast<int>(forward.size());
  t.forwardSeconds = medianSeconds(forward);
  t.backwardSeconds = medianSeconds(afterWarmup(samples.backwardSeconds, warmup));
  if (!samples.weightGradientSeconds.empty())
    t.weightGradientSeconds =
        std::min(t.backwardSeconds, medianSeconds(afterWarmup(samples.weightGradientSeconds, warmup)));
  return t;
}

}  // namespace strata::pipeline
