// Parsers for the small sections: modelparallel, dataparallel, profiler, checkpoint,
// collectives, logging. The debugger and rules sections have their own files.
#include "config/sections.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace strata::config::detail {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
// Above a day a wait is a hang, not patience; it also keeps milliseconds far from overflow.
constexpr int64_t kMaxTimeoutMs = 24LL * 3600 * 1000;
// A bucket above 64 GiB cannot overlap anything with backward; it is a typo for a smaller number.
constexpr double kMaxBucketCapMb = 65536;

void readManualPartition(const ObjectReader& r, ModelParallelConfig& mp) {
  if (!r.has("manual_partition")) return;
  const Validator& v = r.validator();
  const std::string path = r.pathOf("manual_partition");
  v.expectObject(r.at("manual_partition"), path);
  for (const auto& item : r.at("manual_partition").items()) {
    const std::string itemPath = childPath(path, item.key());
    const int64_t partition = v.expectInt(item.value(), itemPath, 0, kMaxInt);
    if (partition >= mp.partitions) {
      v.fail(itemPath, "partition " + std::to_string(partition) +
                           " does not exist: partitions is " + std::to_string(mp.partitions) +
                           ", so valid ones are 0.." + std::to_string(mp.partitions - 1));
    }
    mp.manualPartition[item.key()] = static_cast<int>(partition);
  }
  if (!mp.manualPartition.empty() && mp.autoPartition)
    v.fail(path, "manual placement needs \"auto_partition\": false (auto partitioning is on)");
}

}  // namespace

ModelParallelConfig parseModelParallel(const Validator& v, const Json& section,
                                       const std::string& path) {
  ModelParallelConfig mp;
  const ObjectReader r(v, section, path,
                       {"enabled", "partitions", "microbatches", "pipeline", "optimize", "ddp",
                        "placement_strategy", "auto_partition", "default_partition",
                        "manual_partition", "memory_weight", "memory_cap_mb", "optimizer_state_factor",
                        "active_microbatches",
                        "virtual_stages", "activation_checkpointing"});
  r.read("enabled", mp.enabled);
  r.read("partitions", mp.partitions, 1, kMaxInt);
  r.read("microbatches", mp.microbatches, 1, kMaxInt);
  r.readEnum("pipeline", mp.pipeline, {"simple", "interleaved", "zero_bubble"});
  r.readEnum("optimize", mp.optimize, {"speed", "memory"});
  r.read("ddp", mp.ddp);
  r.readEnum("placement_strategy", mp.placementStrategy, {"cluster", "spread"});
  r.read("auto_partition", mp.autoPartition);
  r.read("default_partition", mp.defaultPartition, 0, kMaxInt);
  if (r.has("memory_weight"))
    mp.memoryWeight = v.expectNumber(r.at("memory_weight"), r.pathOf("memory_weight"), 0.0, 1.0);
  if (r.has("memory_cap_mb"))
    mp.memoryCapMb = v.expectNumber(r.at("memory_cap_mb"), r.pathOf("memory_cap_mb"), 0.0,
                                    std::numeric_limits<double>::infinity(), true);
  if (r.has("optimizer_state_factor"))
    mp.optimizerStateFactor =
        v.expectNumber(r.at("optimizer_state_factor"), r.pathOf("optimizer_state_factor"), 0.0, 64.0);
  if (r.has("active_microbatches"))
    mp.activeMicrobatches = static_cast<int>(
        v.expectInt(r.at("active_microbatches"), r.pathOf("active_microbatches"), 1, kMaxInt));
  r.read("virtual_stages", mp.virtualStages, 1, kMaxInt);
  r.read("activation_checkpointing", mp.activationCheckpointing);
  if (mp.partitions > 1 && !mp.enabled) {
    v.fail(r.pathOf("partitions"), "partitions " + std::to_string(mp.partitions) +
                                       " needs \"enabled\": true (model parallelism is off)");
  }
  if (mp.defaultPartition >= mp.partitions) {
    v.fail(r.pathOf("default_partition"),
           "partition " + std::to_string(mp.defaultPartition) + " does not exist: partitions is " +
               std::to_string(mp.partitions) + ", so valid ones are 0.." +
               std::to_string(mp.partitions - 1));
  }
  if (mp.pipeline == "zero_bubble" && mp.virtualStages > 1)
    v.fail(r.pathOf("virtual_stages"), std::to_string(mp.virtualStages) +
                                           " virtual stages: the zero_bubble schedule (ZB-H1) runs one stage per rank");
  if (mp.pipeline == "zero_bubble" && mp.activationCheckpointing)
    v.fail(r.pathOf("activation_checkpointing"),
           "the zero_bubble schedule keeps each stage's autograd graph from B to W, which activation "
           "checkpointing would recompute; use \"interleaved\" or \"simple\" with it");
  readManualPartition(r, mp);
  if (!mp.manualPartition.empty() && mp.virtualStages > 1) {
    v.fail(r.pathOf("manual_partition"),
           "manual placement assigns layers to partitions, which is ambiguous with " +
               std::to_string(mp.virtualStages) + " virtual stages; use auto partitioning");
  }
  return mp;
}

DataParallelConfig parseDataParallel(const Validator& v, const Json& section,
                                     const std::string& path) {
  DataParallelConfig dp;
  const ObjectReader r(v, section, path, {"enabled", "bucket_cap_mb", "gradient_dtype", "shard_optimizer_state",
                                                  "host_shared_parameters"});
  r.read("enabled", dp.enabled);
  r.read("bucket_cap_mb", dp.bucketCapMb, 0.0, kMaxBucketCapMb, /*minExclusive=*/true);
  r.readEnum("gradient_dtype", dp.gradientDtype, {"float32", "float16", "bfloat16"});
  r.read("shard_optimizer_state", dp.shardOptimizerState);
  r.read("host_shared_parameters", dp.hostSharedParameters);
  if (dp.hostSharedParameters && !dp.shardOptimizerState)
    v.fail(r.pathOf("host_shared_parameters"),
           "true needs \"shard_optimizer_state\": true (each rank steps its shard of the host's one copy)");
  return dp;
}

namespace {

FrameworkProfile parseFrameworkProfile(const Validator& v, const Json& section,
                                       const std::string& path) {
  FrameworkProfile fp;
  const ObjectReader r(v, section, path,
                       {"start_step", "num_steps", "start_unix_time", "duration"});
  r.read("start_step", fp.startStep, 0, kNoMax);
  r.read("num_steps", fp.numSteps, 1, kNoMax);
  const bool bySteps = r.has("start_step") || r.has("num_steps");
  const bool byTime = r.has("start_unix_time") || r.has("duration");
  if (bySteps && byTime) {
    v.fail(path,
           "give a step range (\"start_step\", \"num_steps\") or a time range "
           "(\"start_unix_time\", \"duration\"), not both");
  }
  if (byTime) {
    if (!r.has("start_unix_time"))
      v.fail(path, "\"duration\" needs \"start_unix_time\" (seconds since the epoch)");
    if (!r.has("duration")) v.fail(path, "\"start_unix_time\" needs \"duration\" (seconds)");
    fp.startUnixTime = std::chrono::seconds(
        v.expectInt(r.at("start_unix_time"), r.pathOf("start_unix_time"), 0, kNoMax));
    fp.duration = std::chrono::duration<double>(
        v.expectNumber(r.at("duration"), r.pathOf("duration"), 0.0,
                       std::numeric_limits<double>::infinity(), true));
  }
  return fp;
}

}  // namespace

ProfilerConfig parseProfiler(const Validator& v, const Json& section, const std::string& path) {
  ProfilerConfig pc;
  const ObjectReader r(v, section, path,
                       {"disable_profiler", "system_monitor_interval_millis", "framework_profile"});
  r.read("disable_profiler", pc.disableProfiler);
  if (r.has("system_monitor_interval_millis")) {
    const std::string p = r.pathOf("system_monitor_interval_millis");
    const int64_t ms = v.expectInt(r.at("system_monitor_interval_millis"), p, 1, kNoMax);
    const auto& allowed = kSystemMonitorIntervalsMs;
    if (std::find(std::begin(allowed), std::end(allowed), ms) == std::end(allowed)) {
      v.fail(p, std::to_string(ms) +
                    " is not one of 100, 200, 500, 1000, 5000, 60000 "
                    "(the intervals SageMaker allows)");
    }
    pc.systemMonitorInterval = std::chrono::milliseconds(ms);
  }
  if (r.has("framework_profile"))
    pc.frameworkProfile =
        parseFrameworkProfile(v, r.at("framework_profile"), r.pathOf("framework_profile"));
  return pc;
}

CheckpointConfig parseCheckpoint(const Validator& v, const Json& section, const std::string& path) {
  CheckpointConfig cc;
  const ObjectReader r(v, section, path, {"dir", "every_steps", "resume", "keep", "async"});
  r.read("dir", cc.dir);
  r.read("every_steps", cc.everySteps, 0, kNoMax);
  r.read("resume", cc.resume);
  r.read("keep", cc.keep, 0, kMaxInt);
  r.read("async", cc.async);
  return cc;
}

CollectivesConfig parseCollectives(const Validator& v, const Json& section,
                                   const std::string& path) {
  CollectivesConfig cc;
  const ObjectReader r(v, section, path, {"timeout_ms", "transport", "allreduce_algo"});
  if (r.has("timeout_ms"))
    cc.timeout = std::chrono::milliseconds(
        v.expectInt(r.at("timeout_ms"), r.pathOf("timeout_ms"), 1, kMaxTimeoutMs));
  r.readEnum("transport", cc.transport, {"auto", "shm", "tcp"});
  r.readEnum("allreduce_algo", cc.allreduceAlgo,
             {"auto", "shm_oneshot", "shm_chunked", "shm_direct", "tcp_direct", "tcp_ring", "hierarchical",
              "hierarchical_direct"});
  return cc;
}

LoggingConfig parseLogging(const Validator& v, const Json& section, const std::string& path) {
  // The names core/logging.cpp accepts in STRATA_LOG_LEVEL and STRATA_LOG_SUBSYS.
  static const std::vector<std::string> kLevels = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
  static const std::vector<std::string> kSubsystems = {"ALL", "INIT", "COLL", "P2P",   "SHM",
                                                       "NET", "PIPE", "PROF", "RULES", "CONFIG"};
  LoggingConfig lc;
  const ObjectReader r(v, section, path, {"level", "subsys", "ranks", "file"});
  if (r.has("level")) lc.level = v.expectEnum(r.at("level"), r.pathOf("level"), kLevels);
  if (r.has("subsys")) {
    const std::string p = r.pathOf("subsys");
    for (const std::string& name : v.expectStringList(r.at("subsys"), p)) {
      if (std::find(kSubsystems.begin(), kSubsystems.end(), name) == kSubsystems.end())
        v.fail(p, "\"" + name + "\" is not a subsystem" +
                      suggestionSuffix(name, kSubsystems, "valid names"));
      if (name != "ALL") lc.subsys.push_back(name);
    }
  }
  if (r.has("ranks")) {
    const std::string p = r.pathOf("ranks");
    const Json& ranks = v.expectArray(r.at("ranks"), p);
    for (size_t i = 0; i < ranks.size(); ++i)
      lc.ranks.push_back(static_cast<int>(v.expectInt(ranks[i], childPath(p, i), 0, kMaxInt)));
  }
  if (r.has("file")) lc.file = v.expectString(r.at("file"), r.pathOf("file"));
  return lc;
}

}  // namespace strata::config::detail
