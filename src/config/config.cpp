// parseJobConfig: the top level, checks across sections, derived values; and toJson.
#include "config/config.h"

#include "config/sections.h"
#include "core/errors.h"

namespace strata::config {
namespace {

using detail::Json;
using detail::ObjectReader;
using detail::Validator;

const std::vector<std::string> kTopLevelKeys = {"modelparallel", "dataparallel", "output_dir",
                                                "debugger",      "profiler",     "rules",
                                                "checkpoint",    "collectives",  "logging",
                                                "security",      "flight_recorder", "memory"};

// Model parallelism and data parallelism meet in modelparallel.ddp (SageMaker's name for
// data parallel across pipeline replicas). The file may say either, so they must agree;
// afterwards dataParallel.enabled is the effective truth for the whole job.
void reconcileParallelism(const Validator& v, const Json& doc, JobConfig& config) {
  const ModelParallelConfig& mp = config.modelParallel;
  const bool dpExplicit = doc.contains("dataparallel") && doc["dataparallel"].contains("enabled");
  if (mp.ddp && !mp.enabled) {
    v.fail(
        "/modelparallel/ddp",
        "\"ddp\" joins pipeline replicas and needs \"enabled\": true (model parallelism is off); "
        "data parallelism alone is the \"dataparallel\" section");
  }
  if (!mp.enabled) return;
  if (dpExplicit && config.dataParallel.enabled != mp.ddp) {
    v.fail("/dataparallel/enabled",
           std::string(config.dataParallel.enabled ? "true" : "false") +
               " contradicts /modelparallel/ddp " + (mp.ddp ? "true" : "false") +
               ": with model parallelism on, data parallelism across pipeline replicas is "
               "\"ddp\" in \"modelparallel\"");
  }
  config.dataParallel.enabled = mp.ddp;
}

}  // namespace

JobConfig parseJobConfig(const std::string& jsonText, const std::string& sourceName) {
  const Validator v(sourceName);
  const Json doc = detail::parseStrict(jsonText, sourceName);
  const ObjectReader r(v, doc, "", kTopLevelKeys);
  JobConfig config;
  config.source = sourceName;
  if (r.has("modelparallel"))
    config.modelParallel =
        detail::parseModelParallel(v, r.at("modelparallel"), r.pathOf("modelparallel"));
  if (r.has("dataparallel"))
    config.dataParallel =
        detail::parseDataParallel(v, r.at("dataparallel"), r.pathOf("dataparallel"));
  r.read("output_dir", config.outputDir);
  if (r.has("debugger"))
    config.debugger = detail::parseDebugger(v, r.at("debugger"), r.pathOf("debugger"));
  if (r.has("profiler"))
    config.profiler = detail::parseProfiler(v, r.at("profiler"), r.pathOf("profiler"));
  if (r.has("rules")) config.rules = detail::parseRules(v, r.at("rules"), r.pathOf("rules"));
  if (r.has("checkpoint"))
    config.checkpoint = detail::parseCheckpoint(v, r.at("checkpoint"), r.pathOf("checkpoint"));
  if (r.has("collectives"))
    config.collectives = detail::parseCollectives(v, r.at("collectives"), r.pathOf("collectives"));
  if (r.has("logging"))
    config.logging = detail::parseLogging(v, r.at("logging"), r.pathOf("logging"));
  if (r.has("security"))
    config.security = detail::parseSecurity(v, r.at("security"), r.pathOf("security"));
  if (r.has("flight_recorder"))
    config.flightRecorder = detail::parseFlightRecorder(v, r.at("flight_recorder"), r.pathOf("flight_recorder"));
  if (r.has("memory")) config.memory = detail::parseMemory(v, r.at("memory"), r.pathOf("memory"));

  reconcileParallelism(v, doc, config);
  if (config.checkpoint.dir.empty()) config.checkpoint.dir = config.outputDir + "/ckpt";
  return config;
}

JobConfig defaultJobConfig() { return parseJobConfig("{}", "<defaults>"); }

void checkWorldSize(const JobConfig& config, int worldSize) {
  const ModelParallelConfig& mp = config.modelParallel;
  const auto fail = [&](const std::string& what) {
    STRATA_THROW(ConfigError, config.source, ": ", what);
  };
  if (worldSize < 1)
    fail("world size " + std::to_string(worldSize) + " is not a positive number of ranks");
  if (mp.enabled && worldSize % mp.partitions != 0) {
    fail("/modelparallel/partitions: " + std::to_string(mp.partitions) +
         " does not divide the world size " + std::to_string(worldSize));
  }
  const int pipelines = mp.enabled ? worldSize / mp.partitions : worldSize;
  if (pipelines > 1 && !config.dataParallel.enabled) {
    fail("the world of " + std::to_string(worldSize) + " ranks holds " + std::to_string(pipelines) +
         " model replicas, but data parallelism is off (" +
         (mp.enabled ? "/modelparallel/ddp" : "/dataparallel/enabled") +
         " is false), so they would train independently; enable it or launch " +
         std::to_string(worldSize / pipelines) + " rank(s)");
  }
}

nlohmann::json toJson(const JobConfig& config) {
  const ModelParallelConfig& mp = config.modelParallel;
  Json out;
  out["modelparallel"] = {{"enabled", mp.enabled},
                          {"partitions", mp.partitions},
                          {"microbatches", mp.microbatches},
                          {"pipeline", mp.pipeline},
                          {"optimize", mp.optimize},
                          {"ddp", mp.ddp},
                          {"placement_strategy", mp.placementStrategy},
                          {"auto_partition", mp.autoPartition},
                          {"default_partition", mp.defaultPartition},
                          {"manual_partition", mp.manualPartition},
                          {"virtual_stages", mp.virtualStages},
                          {"activation_checkpointing", mp.activationCheckpointing}};
  if (mp.activeMicrobatches) out["modelparallel"]["active_microbatches"] = *mp.activeMicrobatches;
  if (mp.memoryWeight) out["modelparallel"]["memory_weight"] = *mp.memoryWeight;
  if (mp.memoryCapMb) out["modelparallel"]["memory_cap_mb"] = *mp.memoryCapMb;
  if (mp.optimizerStateFactor) out["modelparallel"]["optimizer_state_factor"] = *mp.optimizerStateFactor;
  const DataParallelConfig& dp = config.dataParallel;
  out["dataparallel"] = {{"enabled", dp.enabled},
                         {"bucket_cap_mb", dp.bucketCapMb},
                         {"gradient_dtype", dp.gradientDtype},
                         {"shard_optimizer_state", dp.shardOptimizerState},
                         {"host_shared_parameters", dp.hostSharedParameters}};
  out["output_dir"] = config.outputDir;
  out["debugger"] = detail::debuggerToJson(config.debugger);
  const ProfilerConfig& pc = config.profiler;
  out["profiler"] = {{"disable_profiler", pc.disableProfiler},
                     {"system_monitor_interval_millis", pc.systemMonitorInterval.count()}};
  if (const auto& fp = pc.frameworkProfile) {
    out["profiler"]["framework_profile"] =
        fp->byTime() ? Json{{"start_unix_time", fp->startUnixTime->count()},
                            {"duration", fp->duration->count()}}
                     : Json{{"start_step", fp->startStep}, {"num_steps", fp->numSteps}};
  }
  out["rules"] = detail::rulesToJson(config.rules);
  const CheckpointConfig& cc = config.checkpoint;
  out["checkpoint"] = {
      {"dir", cc.dir}, {"every_steps", cc.everySteps}, {"resume", cc.resume}, {"keep", cc.keep},
      {"async", cc.async}};
  const CollectivesConfig& co = config.collectives;
  out["collectives"] = {{"timeout_ms", co.timeout.count()},
                        {"transport", co.transport},
                        {"allreduce_algo", co.allreduceAlgo}};
  const LoggingConfig& lc = config.logging;
  out["logging"] = Json::object();
  if (lc.level) out["logging"]["level"] = *lc.level;
  if (!lc.subsys.empty()) out["logging"]["subsys"] = lc.subsys;
  if (!lc.ranks.empty()) out["logging"]["ranks"] = lc.ranks;
  if (lc.file) out["logging"]["file"] = *lc.file;
  out["security"] = detail::securityToJson(config.security);
  out["flight_recorder"] = {{"entries", config.flightRecorder.entries},
                            {"dump_on_finalize", config.flightRecorder.dumpOnFinalize},
                            {"clock", config.flightRecorder.clock},
                            {"tick_ms", config.flightRecorder.tickMs}};
  out["memory"] = {{"malloc", config.memory.malloc}};
  return out;
}

}  // namespace strata::config
