// The all-rank simulator: runs every rank's program against the others with the executor's
// semantics (eager sends, blocking receives, FIFO per ordered rank pair, tag check) and a cost
// model, and predicts step time, busy/idle time, bubble and in-flight activations.
//
// Split backward (zero_bubble): a rank whose program has a kBackwardWeight for (stage,
// microbatch) pays backwardSeconds - weightGradientSeconds for the kBackward and
// weightGradientSeconds for the W, and keeps the microbatch stashed until the W. The
// simulator checks that every B of such a rank has exactly one W, after it.
//
// Message timing: a send costs its rank nothing; the message occupies the link (src, dst)
// for bytes / bandwidth after both the send and the previous message on that link, then
// arrives `latency` later. A receive waits for the head message of its channel; a head with
// another tag is a mismatch (the programs disagree), an empty channel that can never fill
// is a deadlock. Both are reported, never thrown.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "pipeline/layer_cost.h"
#include "pipeline/partitioner.h"
#include "pipeline/program.h"

namespace strata::pipeline {

struct StageCost {
  double forwardSeconds = 0;
  double backwardSeconds = 0;        // the whole backward (B + W)
  double weightGradientSeconds = 0;  // its W part: a split B costs backwardSeconds - this
  size_t outputBytes = 0;  // activation sent to the next stage (its gradient comes back)
  size_t stashBytes = 0;   // per microbatch in flight
  size_t staticBytes = 0;  // parameters + gradients + optimizer state
};

struct CostModel {
  int partitions = 1;
  int virtualStages = 1;
  std::vector<StageCost> stages;  // per global stage, size p * v
  LinkModel link;
  double loadSeconds = 0;                 // kLoadMicrobatch
  std::vector<double> reduceSeconds;      // kReduceGradients per pipeline rank (empty: 0)
  double optimizerSeconds = 0;            // kOptimizerStep
};

// Every stage costs forward/backward seconds and moves activationBytes; no memory. W is
// kDefaultWeightGradientShare of the backward.
CostModel uniformCostModel(int partitions, int virtualStages, double forwardSeconds,
                           double backwardSeconds, size_t activationBytes = 0,
                           LinkModel link = {});

// Costs from a partition of a layer profile (stage k of the partition = global stage k,
// so the partition must have p * v stages); W is the stage's layers' W (measured, or
// kDefaultWeightGradientShare of a layer's backward where not measured). With
// dataParallelSize > 1 each rank's kReduceGradients is a ring AllReduce of its gradient bytes over the same link:
// 2 (d-1) latencies + 2 (d-1)/d * bytes / bandwidth.
CostModel costModelFor(const Partition& partition, int partitions, int virtualStages,
                       const LinkModel& link, int dataParallelSize = 1);

struct RankStats {
  double busySeconds = 0;    // compute (forward, backward, load, reduce, optimizer)
  double idleSeconds = 0;    // stepSeconds - busySeconds
  double finishSeconds = 0;  // when its last instruction ended
  int peakInFlight = 0;      // chunk-microbatches stashed at once (all chunks of the rank)
  size_t peakStashBytes = 0; // their bytes at the worst moment
  size_t staticBytes = 0;
  size_t peakMemoryBytes = 0;  // staticBytes + peakStashBytes
};

struct TimedInstruction {
  int rank = 0;
  int index = 0;  // in the rank's program
  double startSeconds = 0;
  double endSeconds = 0;
};

struct SimulationResult {
  bool ok = false;
  std::vector<std::string> errors;  // deadlock (who waits on what) or tag mismatch
  double stepSeconds = 0;
  double bubbleFraction = 0;   // idle / (ranks * step): GPipe's (p-1)/(m+p-1) convention
  double bubbleOverIdeal = 0;  // idle / busy: Megatron's (p-1)/m, (p-1)/(v m) convention
  std::vector<RankStats> ranks;
  std::vector<int> peakInFlightPerStage;         // index = global stage
  std::vector<size_t> peakStashBytesPerStage;    // peakInFlightPerStage x the stage's stash bytes
  std::vector<TimedInstruction> timeline;  // every executed instruction, in execution order
};

// programs[r] must be rank r's program. Throws strata::Error only for misuse (wrong number
// of programs, cost model of the wrong shape, an instruction whose peer is out of range).
SimulationResult simulate(const std::vector<Program>& programs, const CostModel& costs);

}  // namespace strata::pipeline
