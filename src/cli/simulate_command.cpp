// `strata simulate`: plan a pipeline before running it. Partitions a layer profile (or n
// uniform layers) for a schedule, builds every rank's program, runs the all-rank simulator
// and prints the plan: layers, time and memory per stage, predicted step time, bubble, and
// busy/idle and peak memory per rank; with zero_bubble (or --compare) also the bubble of
// simple, 1F1B and zero_bubble on the same partition. Nothing here needs this machine to hold the model.
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command_registry.h"
#include "core/errors.h"
#include "pipeline/plan.h"

namespace strata::cli {
namespace {

struct SimulateArgs {
  std::string profile;
  int uniformLayers = 0;
  double fwdMs = 1, bwdMs = 2, actMb = 0, paramMb = 0;
  int partitions = 1;
  int microbatches = 1;
  std::string pipeline = "interleaved";
  int virtualStages = 1;
  int activeMicrobatches = 0;
  std::string optimize = "speed";
  std::optional<double> latencyUs;
  std::optional<double> bandwidthGbps;
  int dp = 1;
  std::optional<double> memoryCapMb;
  std::optional<double> memoryWeight;
  bool includeSendCost = false;
  std::string manual;
  bool programs = false;
  bool compare = false;
  std::string trace;
};

std::vector<int> parseManual(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      out.push_back(std::stoi(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      STRATA_THROW(ConfigError, "--manual: \"", item, "\" is not a stage number (expected e.g. 0,0,1,1)");
    }
  }
  return out;
}

int runSimulate(const SimulateArgs& args) {
  using namespace strata::pipeline;
  try {
    if (args.profile.empty() == (args.uniformLayers == 0))
      STRATA_THROW(ConfigError, "give exactly one of --profile FILE or --uniform-layers N");
    std::vector<LayerCost> layers;
    PlanRequest request;
    if (!args.profile.empty()) {
      layers = readLayerProfile(args.profile);
      std::ifstream in(args.profile);
      request.link = linkFromJson(nlohmann::json::parse(in), args.profile, request.link);
    } else {
      constexpr double kMiB = 1024.0 * 1024.0;
      layers = uniformLayers(args.uniformLayers, args.fwdMs / 1e3, args.bwdMs / 1e3,
                             static_cast<size_t>(args.actMb * kMiB), static_cast<size_t>(args.paramMb * kMiB));
    }
    if (args.latencyUs) request.link.latencySeconds = *args.latencyUs / 1e6;
    if (args.bandwidthGbps) {
      if (!(*args.bandwidthGbps > 0)) STRATA_THROW(ConfigError, "--bandwidth-gbps must be > 0, got ", *args.bandwidthGbps);
      request.link.bytesPerSecond = *args.bandwidthGbps * 1e9 / 8;
    }
    request.schedule.kind = parseScheduleKind(args.pipeline);
    request.schedule.partitions = args.partitions;
    request.schedule.microbatches = args.microbatches;
    request.schedule.virtualStages = args.virtualStages;
    request.schedule.activeMicrobatches = args.activeMicrobatches;
    request.schedule.dataParallelSize = args.dp;
    request.objective = parseObjective(args.optimize);
    request.includeSendCost = args.includeSendCost;
    if (args.memoryCapMb) {
      if (!(*args.memoryCapMb > 0)) STRATA_THROW(ConfigError, "--memory-cap-mb must be > 0, got ", *args.memoryCapMb);
      request.memoryCapBytes = static_cast<size_t>(*args.memoryCapMb * 1024 * 1024);
    }
    request.memoryWeight = args.memoryWeight;  // checked by the partitioner (ConfigError outside [0, 1])
    if (!args.manual.empty()) request.manualStageOfLayer = parseManual(args.manual);
    const PipelinePlan plan = planPipeline(layers, request);
    std::string text = formatPlan(plan);
    if (args.compare || request.schedule.kind == ScheduleKind::kZeroBubble)
      text += formatScheduleComparison(compareSchedules(plan));
    if (args.programs)
      for (const Program& prog : plan.programs) text += formatProgram(prog, args.partitions) + "\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (!args.trace.empty()) {
      std::ofstream out(args.trace);
      out << chromeTrace(plan).dump() << "\n";
      if (!out) STRATA_THROW(ConfigError, "--trace: cannot write \"", args.trace, "\"");
      std::printf("simulated timeline: %s (chrome://tracing)\n", args.trace.c_str());
    }
    return plan.partition.ok && plan.simulation.ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata simulate: %s\n", e.what());
    return 2;
  }
}

const CommandRegistrar registrar("simulate", [](CLI::App& app, int& exitCode) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Plan a pipeline: partition a layer profile, simulate the schedule, print step time, bubble, memory");
  cmd->add_option("--profile", args->profile, "Layer profile JSON (see docs/pipeline.md)");
  cmd->add_option("--uniform-layers", args->uniformLayers, "Plan N identical layers instead of a profile");
  cmd->add_option("--fwd-ms", args->fwdMs, "Uniform layers: forward ms per microbatch")->capture_default_str();
  cmd->add_option("--bwd-ms", args->bwdMs, "Uniform layers: backward ms per microbatch")->capture_default_str();
  cmd->add_option("--act-mb", args->actMb, "Uniform layers: activation MiB per microbatch")->capture_default_str();
  cmd->add_option("--param-mb", args->paramMb, "Uniform layers: parameter MiB (gradients the same)")
      ->capture_default_str();
  cmd->add_option("--partitions", args->partitions, "Pipeline stages (ranks) p")->capture_default_str();
  cmd->add_option("--microbatches", args->microbatches, "Microbatches per step m")->capture_default_str();
  cmd->add_option("--pipeline", args->pipeline, "simple | interleaved | zero_bubble")->capture_default_str();
  cmd->add_option("--virtual-stages", args->virtualStages, "Model chunks per rank v (Megatron)")
      ->capture_default_str();
  cmd->add_option("--active-microbatches", args->activeMicrobatches,
                  "interleaved: microbatches in flight at most (0 = partitions + 2)")
      ->capture_default_str();
  cmd->add_option("--optimize", args->optimize, "speed | memory")->capture_default_str();
  cmd->add_option("--latency-us", args->latencyUs, "Link latency (overrides the profile's link)");
  cmd->add_option("--bandwidth-gbps", args->bandwidthGbps, "Link bandwidth in Gb/s (overrides the profile's link)");
  cmd->add_option("--dp", args->dp, "Data-parallel size d (adds the gradient AllReduce)")->capture_default_str();
  cmd->add_option("--memory-cap-mb", args->memoryCapMb, "Per-stage memory cap in MiB");
  cmd->add_option("--memory-weight", args->memoryWeight,
                  "Weight of memory against time in the stage cost, [0, 1] (SageMaker's memory_weight)");
  cmd->add_flag("--include-send-cost", args->includeSendCost, "speed: count the activation send in stage time");
  cmd->add_option("--manual", args->manual, "Manual partition: a stage per layer, e.g. 0,0,1,1");
  cmd->add_flag("--programs", args->programs, "Also print every rank's program");
  cmd->add_flag("--compare", args->compare,
                "Also simulate simple, 1F1B and zero_bubble on the same partition (always with zero_bubble)");
  cmd->add_option("--trace", args->trace, "Write the simulated timeline as a Chrome trace JSON file");
  cmd->callback([args, &exitCode] { exitCode = runSimulate(*args); });
});

}  // namespace
}  // namespace strata::cli
