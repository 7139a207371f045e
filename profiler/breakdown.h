// Where the time went, per rank: a temporal breakdown of each rank's framework timeline
// (HTA's "temporal breakdown" and "communication/computation overlap", on Strata's tracks),
// straggler detection among ranks that do the same work, and the slow stage of a pipeline.
// Pure functions over parsed trace events (profiler/timeline_reader.h); `strata breakdown`,
// the HTML report and LoadBalancing use them.
//
// Each rank's period runs from its first to its last slice in the timeline. Every instant of
// it is counted once, in the first class that covers it:
//   compute        forward, backward and optimizer slices (Forward*, Backward*, Optimizer)
//   exposed comm   communication the compute did not hide: AllReduce slices and the training
//                  thread's AllReduceWait, outside compute
//   pipeline wait  blocked on a pipeline peer (Pipeline "recv ..." and "wait sends")
//   data loading   DataLoaderIter (asking for the next batch until the step begins)
//   idle           everything else (the loop's own code, checkpoints, unrecorded work)
// overlap = the part of the communication slices (AllReduce buckets, pipeline sends) that ran
// under compute, in % of their time (none: no communication slices).
//
// A straggler is a rank whose compute per step is consistently slower than that of the ranks
// doing the same work (the same pipeline stages: every rank in data parallelism, a stage's
// replicas in a hybrid run): the slowest in at least `stragglerShare` of the steps they share,
// with a median compute per step at least `stragglerRatio` times its peers'. With several
// pipeline stages, the slow stage computes at least `stageRatio` times the stages' mean.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "profiler/timeline_reader.h"

namespace strata::profiler {

// What a slice counts as (by its phase and name, as the profiler records them and as
// smdebug's PyTorch hook names them).
enum class SliceClass { kStep, kCompute, kComm, kCommWait, kPipelineWait, kDataLoading, kOther };
SliceClass classifySlice(const std::string& phase, const std::string& name);

// A step of one mode: TRAIN step 3 and EVAL step 3 are different steps (each mode numbers its
// own steps from 0, as args.step_num does). mode: "TRAIN", "EVAL", "PREDICT", "GLOBAL", or ""
// when the timeline has no Step:ModeKeys event for the slice's step.
struct StepKey {
  std::string mode;
  int64_t step = 0;
  bool operator<(const StepKey& o) const { return mode != o.mode ? mode < o.mode : step < o.step; }
  bool operator==(const StepKey& o) const { return mode == o.mode && step == o.step; }
};

struct RankTime {
  int rank = -1;
  std::vector<int> stages;  // pipeline stages it ran (args.stage); empty without a pipeline
  int64_t steps = 0;        // Step slices in the timeline
  int64_t periodUs = 0;
  int64_t computeUs = 0, exposedCommUs = 0, pipelineWaitUs = 0, dataLoadingUs = 0, idleUs = 0;
  int64_t commUs = 0, overlappedCommUs = 0;
  std::map<StepKey, int64_t> computeByStep;  // (mode, step) -> compute µs in it

  std::optional<double> overlapPercent() const;
  // Median compute per step (µs) over the TRAIN steps (all steps when there is none: an
  // evaluation step only runs forward); 0 without steps.
  double medianComputeUs() const;
};

struct Straggler {
  int rank = -1;
  std::vector<int> peers;  // the ranks it was compared with
  int64_t slowestSteps = 0, comparedSteps = 0;
  double computeMs = 0, peersMs = 0, ratio = 0;  // median compute per step
  std::string evidence;
};

struct SlowStage {
  std::vector<int> stages;
  std::vector<int> ranks;
  double computeMs = 0, meanMs = 0, ratio = 0;  // per step; the stages' mean
  std::string evidence;
};

struct BreakdownOptions {
  double stragglerShare = 0.6;
  double stragglerRatio = 1.1;
  double stageRatio = 1.25;
  int64_t minSteps = 5;  // shared steps needed before ranks are compared
};

struct Breakdown {
  std::string layout;  // "single rank", "data parallel", "pipeline", "hybrid"; "" without data
  std::vector<RankTime> ranks;  // by rank
  std::vector<Straggler> stragglers;
  std::optional<SlowStage> slowStage;
};

// The mode of a slice with step number `stepNum` starting at `startUs`, from the rank's
// Step:ModeKeys.<MODE> slices: the step slice with that number that contains the start, else
// the latest one that began before it (the optimizer runs after its step's slice), else the
// first one; "" when none has that number. Pure.
struct StepSlice {
  std::string mode;
  int64_t step = 0, startUs = 0, endUs = 0;
};
std::string modeOfSlice(const std::vector<StepSlice>& steps, int64_t stepNum, int64_t startUs);

// The time classes of one rank's slices (any order).
RankTime rankTime(int rank, const std::vector<const TraceEvent*>& events);
std::vector<Straggler> findStragglers(const std::vector<RankTime>& ranks, const BreakdownOptions& options);
std::optional<SlowStage> findSlowStage(const std::vector<RankTime>& ranks, const BreakdownOptions& options);
// All of it for a run's events (events without a rank are left out).
Breakdown analyzeBreakdown(const std::vector<TraceEvent>& events, const BreakdownOptions& options = {});

nlohmann::json toJson(const Breakdown& b);

// Reads every rank's trace files of a run (RUN_DIR or its profiler root; files still open
// too unless `closedOnly`) and analyses them. `files` (optional) gets how many were read.
Breakdown breakdownOfRun(const std::string& runDir, bool closedOnly = false, const BreakdownOptions& options = {},
                         size_t* files = nullptr);

}  // namespace strata::profiler
