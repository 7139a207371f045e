// From repeated timed runs of one layer to its costs (pure: the profile in
// pipeline/adapter/profile.cpp runs the layer and records every run's times, this decides
// what they mean).
//
// A run is a forward and a backward of one microbatch. The first `warmup` runs are dropped
// (first-touch page faults, allocator growth, cold caches: the run that also measures the
// stash is always one of them), and each time is the median of the rest: on a shared
// machine single runs are hit by other processes' bursts, which inflate a mean or a
// best-of-n in both directions far more than they move the median.
//
// The backward's weight-gradient part (zero_bubble's W) comes from split runs: the input
// gradient (B) and then the weight gradients (W), as the executor runs a split backward.
// W's median is capped at the full backward's median (W is part of it).
#pragma once

#include <string>
#include <vector>

namespace strata::pipeline {

struct LayerTimingSamples {
  // One entry per run, in run order (warm-up runs included).
  std::vector<double> forwardSeconds;
  std::vector<double> backwardSeconds;        // the full backward
  std::vector<double> weightGradientSeconds;  // split runs' W (empty: not measured)
};

struct LayerTimes {
  double forwardSeconds = 0;
  double backwardSeconds = 0;
  double weightGradientSeconds = -1;  // -1: not measured (LayerCost's convention)
  int samples = 0;                    // runs the medians are over
};

// Median of v (the mean of the two middle values for an even count); 0 when empty.
double medianSeconds(std::vector<double> v);

// Drops the first `warmup` runs of each series and takes medians. Throws strata::Error
// naming `layer` when the series have different lengths or no run is left after the
// warm-up (a profile must time at least one run).
LayerTimes layerTimesFromSamples(const LayerTimingSamples& samples, int warmup, const std::string& layer);

}  // namespace strata::pipeline
