#include "pipeline/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/errors.h"

namespace strata::pipeline {
namespace {

std::string fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  return buf;
}

std::string ms(double seconds) { return fixed(seconds * 1e3, 3); }

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

std::string layerRange(const std::vector<LayerCost>& layers, const StagePlan& s) {
  const std::string& first = layers[static_cast<size_t>(s.firstLayer)].name;
  if (s.numLayers() == 1) return c10::str(s.firstLayer, " (", first, ")");
  const std::string& last = layers[static_cast<size_t>(s.endLayer - 1)].name;
  return c10::str(s.firstLayer, "-", s.endLayer - 1, " (", first, "..", last, ")");
}

}  // namespace

std::string formatBytes(size_t numBytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(numBytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0) return c10::str(numBytes, " B");
  return fixed(value, value < 10 ? 2 : 1) + " " + units[unit];
}

PipelinePlan planPipeline(const std::vector<LayerCost>& layers, const PlanRequest& request) {
  const ScheduleSpec& spec = request.schedule;
  validateSpec(spec);
  validateLink(request.link);
  PipelinePlan plan;
  plan.request = request;
  plan.layers = layers;
  plan.programs = buildPrograms(spec);
  PartitionOptions options;
  options.objective = request.objective;
  options.includeSendCost = request.includeSendCost;
  options.link = request.link;
  options.memoryCapBytes = request.memoryCapBytes;
  options.memoryWeight = request.memoryWeight;
  options.inFlight = peakInFlightPerStage(plan.programs, spec.partitions, spec.virtualStages);
  for (int& n : options.inFlight) n = std::max(n, 1);
  plan.partition = request.manualStageOfLayer.empty()
                       ? partition(layers, spec.numStages(), options)
                       : manualPartition(layers, request.manualStageOfLayer, spec.numStages(), options);
  if (!plan.partition.ok) {
    plan.programs.clear();
    return plan;
  }
  const CostModel costs =
      costModelFor(plan.partition, spec.partitions, spec.virtualStages, request.link, spec.dataParallelSize);
  plan.simulation = simulate(plan.programs, costs);
  return plan;
}

std::string formatPlan(const PipelinePlan& plan) {
  const ScheduleSpec& spec = plan.request.schedule;
  std::ostringstream out;
  out << "pipeline plan: " << plan.layers.size() << " layers, partitions=" << spec.partitions
      << " virtual_stages=" << spec.virtualStages << " microbatches=" << spec.microbatches
      << " pipeline=" << scheduleKindName(spec.kind);
  if (spec.kind == ScheduleKind::kInterleaved && spec.virtualStages == 1)
    out << " active_microbatches=" << resolvedActiveMicrobatches(spec);
  out << " optimize=" << objectiveName(plan.request.objective);
  if (plan.request.memoryWeight) out << " memory_weight=" << *plan.request.memoryWeight;
  out << " dp=" << spec.dataParallelSize << "\n";
  out << "link: latency " << fixed(plan.request.link.latencySeconds * 1e6, 1) << " us, bandwidth "
      << (std::isfinite(plan.request.link.bytesPerSecond) ? fixed(plan.request.link.bytesPerSecond * 8 / 1e9, 2) + " Gb/s"
                                                         : std::string("unlimited"));
  if (plan.request.memoryCapBytes) out << ", memory cap " << formatBytes(*plan.request.memoryCapBytes);
  out << (plan.request.manualStageOfLayer.empty() ? "" : ", manual partition") << "\n";
  if (!plan.partition.ok) {
    out << "no plan: " << plan.partition.reason << "\n";
    return out.str();
  }
  out << pad("stage", 6) << pad("rank", 5) << pad("layers", 34) << pad("fwd ms", 10) << pad("bwd ms", 10)
      << pad("send ms", 10) << pad("in-flight", 10) << pad("static", 11) << "memory\n";
  const auto& stages = plan.partition.stages;
  for (size_t k = 0; k < stages.size(); ++k) {
    const StagePlan& s = stages[k];
    out << pad(std::to_string(k), 6) << pad(std::to_string(k % static_cast<size_t>(spec.partitions)), 5)
        << pad(layerRange(plan.layers, s), 34) << pad(ms(s.forwardSeconds), 10) << pad(ms(s.backwardSeconds), 10)
        << pad(ms(s.sendSeconds), 10) << pad(std::to_string(s.inFlight), 10) << pad(formatBytes(s.staticBytes), 11)
        << formatBytes(s.memoryBytes) << "\n";
  }
  out << "bottleneck stage time: " << ms(plan.partition.bottleneckSeconds)
      << " ms, peak stage memory: " << formatBytes(plan.partition.peakMemoryBytes) << "\n";
  const SimulationResult& sim = plan.simulation;
  if (!sim.ok) {
    out << "simulation FAILED:\n";
    for (const std::string& e : sim.errors) out << "  " << e << "\n";
    return out.str();
  }
  out << "predicted step time: " << ms(sim.stepSeconds) << " ms, bubble " << fixed(sim.bubbleFraction * 100, 1)
      << "% of rank time (" << fixed(sim.bubbleOverIdeal * 100, 1) << "% over ideal)\n";
  out << pad("rank", 6) << pad("busy ms", 12) << pad("idle ms", 12) << pad("peak in-flight", 16)
      << pad("peak stash", 12) << "peak memory\n";
  for (size_t r = 0; r < sim.ranks.size(); ++r) {
    const RankStats& rs = sim.ranks[r];
    out << pad(std::to_string(r), 6) << pad(ms(rs.busySeconds), 12) << pad(ms(rs.idleSeconds), 12)
        << pad(std::to_string(rs.peakInFlight), 16) << pad(formatBytes(rs.peakStashBytes), 12)
        << formatBytes(rs.peakMemoryBytes) << "\n";
  }
  return out.str();
}

std::vector<ScheduleComparison> compareSchedules(const PipelinePlan& plan) {
  const ScheduleSpec& spec = plan.request.schedule;
  if (!plan.partition.ok || !plan.simulation.ok || spec.virtualStages != 1) return {};
  const CostModel costs = costModelFor(plan.partition, spec.partitions, 1, plan.request.link, spec.dataParallelSize);
  double backward = 0, weight = 0;
  for (const StageCost& stage : costs.stages) {
    backward += stage.backwardSeconds;
    weight += stage.weightGradientSeconds;
  }
  const double share = backward > 0 ? weight / backward : kDefaultWeightGradientShare;
  std::vector<ScheduleComparison> rows;
  auto add = [&](const std::string& name, ScheduleKind kind, int cap) {
    ScheduleSpec s = spec;
    s.kind = kind;
    s.activeMicrobatches = cap;
    const SimulationResult r = simulate(buildPrograms(s), costs);
    STRATA_CHECK(r.ok, "compareSchedules: the ", name, " schedule failed its simulation: ", r.errors.front());
    int peak = 0;
    for (const RankStats& rank : r.ranks) peak = std::max(peak, rank.peakInFlight);
    rows.push_back({name, r.stepSeconds, r.bubbleFraction, r.bubbleOverIdeal, peak, share});
  };
  add("simple (GPipe)", ScheduleKind::kSimple, 0);
  add("1F1B (interleaved, active_microbatches=" + std::to_string(spec.partitions) + ")", ScheduleKind::kInterleaved,
      spec.partitions);
  add("zero_bubble (ZB-H1)", ScheduleKind::kZeroBubble, 0);
  return rows;
}

std::string formatScheduleComparison(const std::vector<ScheduleComparison>& rows) {
  if (rows.empty()) return "";
  double oneFOneBIdle = 0;  // bubble over ideal of the 1F1B row
  for (const ScheduleComparison& row : rows)
    if (row.schedule.rfind("1F1B", 0) == 0) oneFOneBIdle = row.bubbleOverIdeal;
  std::ostringstream out;
  out << "schedules on this partition (W = " << fixed(rows.front().weightGradientShare * 100, 0)
      << "% of the backward):\n"
      << pad("schedule", 44) << pad("step ms", 12) << pad("bubble %", 10) << pad("over ideal %", 14)
      << pad("peak in-flight", 16) << "bubble / 1F1B\n";
  for (const ScheduleComparison& row : rows)
    out << pad(row.schedule, 44) << pad(ms(row.stepSeconds), 12) << pad(fixed(row.bubbleFraction * 100, 1), 10)
        << pad(fixed(row.bubbleOverIdeal * 100, 1), 14) << pad(std::to_string(row.peakInFlight), 16)
        << (oneFOneBIdle > 0 ? fixed(row.bubbleOverIdeal / oneFOneBIdle, 3) : std::string("-")) << "\n";
  return out.str();
}

nlohmann::json chromeTrace(const PipelinePlan& plan) {
  nlohmann::json events = nlohmann::json::array();
  const int p = plan.request.schedule.partitions;
  for (int r = 0; r < static_cast<int>(plan.programs.size()); ++r)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", r},
                      {"args", {{"name", c10::str("pipeline rank ", r)}}}});
  for (const TimedInstruction& t : plan.simulation.timeline) {
    const Instruction& in = plan.programs.at(static_cast<size_t>(t.rank)).instructions.at(static_cast<size_t>(t.index));
    events.push_back({{"name", formatInstruction(in, t.rank, p)},
                      {"cat", opName(in.op)},
                      {"ph", "X"},
                      {"pid", 0},
                      {"tid", t.rank},
                      {"ts", t.startSeconds * 1e6},
                      {"dur", (t.endSeconds - t.startSeconds) * 1e6}});
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace strata::pipeline
