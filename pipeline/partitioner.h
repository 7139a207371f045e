// The partitioner: ordered layers -> contiguous, non-empty stages, exactly optimal.
//
// Stage k holds layers [firstLayer, endLayer). With v virtual stages there are p*v stages and
// stage k lives on pipeline rank k % p (program.h).
//
//   speed   minimises the bottleneck stage time: forward + backward of one microbatch, plus
//           (includeSendCost) the link time of the stage's output activation.
//   memory  minimises the peak stage memory: parameters + gradients + optimizer state +
//           inFlight[k] * stash bytes, where inFlight[k] is how many microbatches the schedule
//           keeps stashed on stage k (peakInFlightPerStage of its programs: m for simple,
//           at most p - k for 1F1B).
//   memoryWeight w (SageMaker's memory_weight, when set) minimises the largest stage cost
//           w * memory / M + (1 - w) * time / T, where M and T are the whole model's
//           (sum over layers of static + stash bytes, of forward + backward seconds).
// All are solved exactly by dynamic programming over cut points (O(stages * layers^2));
// ties on the objective are broken by another objective (memory for speed, time for the
// others; also exactly). An optional memory cap makes every stage above it infeasible.
// Tied layers (tieGroup) may sit on different stages, each holding a copy of the shared
// tensor; a stage holding several of them counts it once. With tiedLayersTogether (the
// SageMaker rule) no cut may separate them instead.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/layer_cost.h"

namespace strata::pipeline {

enum class Objective { kSpeed, kMemory };

// "speed" | "memory"; anything else throws strata::ConfigError naming `optimize`.
Objective parseObjective(const std::string& name);
const char* objectiveName(Objective objective);

struct PartitionOptions {
  Objective objective = Objective::kSpeed;
  bool includeSendCost = false;  // speed: add link.transferSeconds(output activation)
  LinkModel link;
  // Microbatches stashed at peak per stage (size = stages); empty: 1 on every stage.
  std::vector<int> inFlight;
  std::optional<size_t> memoryCapBytes;  // every stage's memory must stay at or below it
  std::optional<double> memoryWeight;     // in [0, 1]: the weighted objective (overrides objective)
  bool tiedLayersTogether = false;        // no cut between layers of one tie group
};

struct StagePlan {
  int firstLayer = 0;
  int endLayer = 0;  // exclusive
  double forwardSeconds = 0;
  double backwardSeconds = 0;
  double weightGradientSeconds = 0;  // of which W (LayerCost::weightGradientOrDefault)
  double sendSeconds = 0;  // output activation over the link (0 for the last stage)
  double timeSeconds = 0;  // forward + backward (+ send when includeSendCost)
  size_t staticBytes = 0;  // parameters + gradients + optimizer state (a tied tensor once)
  size_t gradientBytes = 0;  // what a data-parallel reduction moves
  size_t stashBytes = 0;   // per microbatch in flight
  int inFlight = 1;
  size_t memoryBytes = 0;  // staticBytes + inFlight * stashBytes
  size_t outputBytes = 0;  // activation bytes of the last layer (what the stage sends)
  double cost = 0;         // the weighted objective's stage cost (0 without memoryWeight)

  int numLayers() const { return endLayer - firstLayer; }
};

struct Partition {
  bool ok = false;
  std::string reason;              // when !ok: why no partition exists (names the cap etc.)
  std::vector<StagePlan> stages;   // when ok
  std::vector<int> stageOfLayer;   // when ok; index = layer
  double bottleneckSeconds = 0;    // max stage timeSeconds
  size_t peakMemoryBytes = 0;      // max stage memoryBytes
  double bottleneckCost = 0;       // max stage cost (memoryWeight set)
};

// Optimal automatic partition. Throws strata::ConfigError for misuse: stages < 1, more
// stages than layers, inFlight of the wrong size or < 1, negative or non-finite times, a
// memoryWeight outside [0, 1]. Infeasible requests (memory cap, tie groups forcing too few
// stages) return ok = false with a reason that names the cap and the smallest achievable peak.
Partition partition(const std::vector<LayerCost>& layers, int stages,
                    const PartitionOptions& options);

// A user's layer -> stage assignment. Allowed: stage numbers 0..stages-1, non-decreasing in
// layer order (contiguous stages), every stage non-empty (with tiedLayersTogether: tied
// layers on one stage). Throws
// strata::ConfigError naming the first offending layer otherwise. The memory cap, when set,
// is reported (ok = false) rather than thrown.
Partition manualPartition(const std::vector<LayerCost>& layers, const std::vector<int>& stageOfLayer,
                          int stages, const PartitionOptions& options);

// Per-stage predictions for given cut points (stage k = layers [bounds[k], bounds[k+1])).
// Used by both of the above; exposed for tests and brute force.
Partition evaluateBounds(const std::vector<LayerCost>& layers, const std::vector<int>& bounds,
                         const PartitionOptions& options);

// Parameters + gradients + optimizer state each pipeline rank holds: the stages k with
// k % partitions == rank, a tied tensor counted once per rank. Index = pipeline rank.
std::vector<size_t> rankStaticBytes(const std::vector<LayerCost>& layers, const Partition& partition,
                                    int partitions);

}  // namespace strata::pipeline
