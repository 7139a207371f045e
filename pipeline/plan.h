// The whole planning step in one call: partition a layer profile for a schedule, build the
// programs, simulate them. The executor logs formatPlan() of its plan; `strata simulate`
// prints the same text.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeline/layer_cost.h"
#include "pipeline/partitioner.h"
#include "pipeline/schedule.h"
#include "pipeline/simulator.h"

namespace strata::pipeline {

struct PlanRequest {
  ScheduleSpec schedule;
  Objective objective = Objective::kSpeed;
  std::optional<double> memoryWeight;  // set: the weighted objective (partitioner.h)
  LinkModel link;
  bool includeSendCost = false;
  std::optional<size_t> memoryCapBytes;
  std::vector<int> manualStageOfLayer;  // non-empty: use it instead of the partitioner
};

struct PipelinePlan {
  PlanRequest request;
  std::vector<LayerCost> layers;
  Partition partition;              // partition.ok false: no programs, no simulation
  std::vector<Program> programs;    // one per pipeline rank
  SimulationResult simulation;
};

// Throws strata::ConfigError for invalid requests (spec, link, more stages than layers,
// bad manual partition); an infeasible memory cap comes back as partition.ok == false.
PipelinePlan planPipeline(const std::vector<LayerCost>& layers, const PlanRequest& request);

// Multi-line, human-readable: the request, layers and predicted time and memory per stage,
// predicted step time, bubble, busy/idle and peak memory per rank (or why it failed).
std::string formatPlan(const PipelinePlan& plan);

// The same partition and costs under each schedule with one stage per rank: simple (GPipe),
// 1F1B (interleaved with active_microbatches = p) and zero_bubble (ZB-H1), each with its
// predicted step time, bubble, peak in-flight microbatches and bubble relative to 1F1B's.
// One row per schedule; empty when the plan failed or has virtual stages.
struct ScheduleComparison {
  std::string schedule;
  double stepSeconds = 0;
  double bubbleFraction = 0;   // idle / rank time
  double bubbleOverIdeal = 0;  // idle / busy
  int peakInFlight = 0;        // the most any rank stashes
  double weightGradientShare = 0;  // W / backward over all stages (zero_bubble's split)
};
std::vector<ScheduleComparison> compareSchedules(const PipelinePlan& plan);
std::string formatScheduleComparison(const std::vector<ScheduleComparison>& rows);

// The simulated timeline as a Chrome trace (chrome://tracing, Perfetto): one thread per
// pipeline rank, one complete event per executed instruction (a receive's duration is the
// time it waited). Empty event list when the plan has no simulation.
nlohmann::json chromeTrace(const PipelinePlan& plan);

// "1.50 GiB", "12.0 KiB", "17 B".
std::string formatBytes(size_t numBytes);

}  // namespace strata::pipeline
