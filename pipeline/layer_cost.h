// Per-layer costs and the link model: the inputs of the partitioner and the simulator.
//
// A layer profile is what the executor measures on a sample microbatch (or what a user
// writes by hand to plan a run bigger than this machine). It is plain data with a JSON
// form, so `strata simulate --profile layers.json` and the executor's log share it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace strata::pipeline {

struct LayerCost {
  std::string name;
  double forwardSeconds = 0;   // one microbatch
  double backwardSeconds = 0;  // one microbatch (input and weight gradients)
  size_t parameterBytes = 0;  // parameters and buffers
  size_t gradientBytes = 0;
  size_t optimizerStateBytes = 0;
  size_t activationBytes = 0;  // the layer's output for one microbatch (crosses a stage cut)
  size_t stashBytes = 0;       // kept from forward to backward, per microbatch in flight
  // Layers with the same tieGroup >= 0 share a parameter (tied embeddings; -1: none). Each
  // layer counts the shared tensor in its own bytes: on different stages every stage holds a
  // copy (their gradients are summed after backward). tiedBytes is the part of staticBytes()
  // that is the shared tensor (parameter + gradient + optimizer state): a stage or rank
  // holding several layers of one group holds it once.
  int tieGroup = -1;
  size_t tiedBytes = 0;
  // The weight-gradient part (zero_bubble's W) of backwardSeconds, measured by running the
  // backward split in two; < 0: not measured (kDefaultWeightGradientShare of the backward).
  double weightGradientSeconds = -1;

  size_t staticBytes() const { return parameterBytes + gradientBytes + optimizerStateBytes; }
  // The W part: measured (at most the whole backward), else the default share.
  double weightGradientOrDefault() const;
};

// The share of a backward that is the weight-gradient pass (zero_bubble's W) when only the
// total backward time is known (a hand-written profile): a Linear or convolution layer's
// backward is two products the size of its forward, one for the input gradient and one for
// the weight gradient, so half of it (the zero-bubble paper's t_B = t_W). Measured profiles
// carry the split (weightGradientSeconds): on this machine W is 60-65 % of a Linear layer's
// backward at 16 rows, and 0 for layers without parameters.
constexpr double kDefaultWeightGradientShare = 0.5;

// Point-to-point link between two pipeline ranks: time = latency + bytes / bandwidth.
struct LinkModel {
  double latencySeconds = 0;
  double bytesPerSecond = std::numeric_limits<double>::infinity();

  double transferSeconds(size_t numBytes) const {
    return latencySeconds + static_cast<double>(numBytes) / bytesPerSecond;
  }
};

// Throws strata::ConfigError naming the field and value (negative latency, bandwidth <= 0).
void validateLink(const LinkModel& link);

// JSON form of a profile (times in milliseconds, sizes in bytes; unknown keys rejected):
//   {"layers": [{"name": "fc1", "forward_ms": 1.5, "backward_ms": 3.0,
//                "parameter_bytes": 4096, "gradient_bytes": 4096, "optimizer_state_bytes": 8192,
//                "activation_bytes": 1024, "stash_bytes": 2048, "tie_group": -1,
//                "weight_gradient_ms": 1.8}, ...],
//    "link": {"latency_us": 50, "bandwidth_gbps": 10}}          ("link" optional)
// Only "name" is required per layer; missing numbers are 0 (tie_group -1; weight_gradient_ms
// absent: kDefaultWeightGradientShare of backward_ms; above backward_ms: an error).
// `source` (a path) starts every error message. Throws strata::ConfigError.
std::vector<LayerCost> layerProfileFromJson(const nlohmann::json& json, const std::string& source);
nlohmann::json layerProfileToJson(const std::vector<LayerCost>& layers);

// The optional "link" object of a profile file; `fallback` when absent.
LinkModel linkFromJson(const nlohmann::json& json, const std::string& source, LinkModel fallback);
nlohmann::json linkToJson(const LinkModel& link);

// File helpers (the only I/O here). Throw strata::ConfigError naming the path.
std::vector<LayerCost> readLayerProfile(const std::string& path);
void writeLayerProfile(const std::string& path, const std::vector<LayerCost>& layers);

// n identical layers, for planning without a profile (`--uniform-layers`).
std::vector<LayerCost> uniformLayers(int count, double forwardSeconds, double backwardSeconds,
                                     size_t activationBytes, size_t parameterBytes = 0);

}  // namespace strata::pipeline
