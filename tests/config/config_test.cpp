// Valid configs: defaults, the DESIGN.md §2 example, every key at once, normalisation of
// SageMaker-style values, derived values, and the toJson round trip.
#include "config/config.h"

#include <gtest/gtest.h>

#include "core/errors.h"

namespace strata::config {
namespace {

// DESIGN.md §2, verbatim.
const char* kDesignExample = R"({
  "modelparallel": {"enabled": true, "partitions": 2, "microbatches": 4,
                    "pipeline": "interleaved", "optimize": "speed", "ddp": true},
  "dataparallel":  {"enabled": true, "bucket_cap_mb": 25},
  "output_dir": "runs/job-1",
  "debugger": {"collections": [{"name": "losses", "save_interval": 10},
                               {"name": "gradients", "save_interval": 100, "reductions": ["abs_mean"]},
                               {"name": "custom", "include_regex": ".*relu_output", "save_interval": 50}]},
  "profiler": {"system_monitor_interval_millis": 500,
               "framework_profile": {"start_step": 2, "num_steps": 7}},
  "rules": [{"name": "LossNotDecreasing", "actions": ["StopTraining"]},
            {"name": "ProfilerReport", "parameters": {"CPUBottleneck_cpu_threshold": 90}}],
  "checkpoint": {"dir": "runs/job-1/ckpt", "every_steps": 100, "resume": true}
})";

// Every key of every section, with non-default values.
const char* kEveryKey = R"({
  "modelparallel": {"enabled": true, "partitions": 4, "microbatches": 8, "pipeline": "simple",
                    "optimize": "memory", "ddp": true, "placement_strategy": "spread",
                    "auto_partition": false, "default_partition": 1,
                    "manual_partition": {"embed": 0, "head": 3}, "memory_weight": 0.25,
                    "memory_cap_mb": 512, "optimizer_state_factor": 1, "active_microbatches": 6},
  "dataparallel": {"enabled": true, "bucket_cap_mb": 12.5, "gradient_dtype": "bfloat16", "shard_optimizer_state": true,
                   "host_shared_parameters": true},
  "output_dir": "/tmp/strata-run",
  "debugger": {"save_interval": 20, "start_step": 3, "end_step": 1000, "save_steps": [7, 1, 7],
               "include_workers": "all",
               "collections": [{"name": "weights", "reductions": "max, l2, abs_l1", "save_raw_tensor": true},
                               {"name": "acts", "include_regex": [".*relu_output", "^fc\\d+"],
                                "save_interval": 5, "start_step": 0, "end_step": null, "save_steps": []}]},
  "profiler": {"disable_profiler": true, "system_monitor_interval_millis": 100,
               "framework_profile": {"start_unix_time": 1700000000, "duration": 12.5}},
  "rules": [{"name": "VanishingGradient", "parameters": {"threshold": "1e-7"}},
            {"name": "ExplodingTensor", "actions": ["StopTraining"],
             "parameters": {"only_nan": "True", "collection_names": "gradients,weights"}},
            {"name": "ProfilerReport", "parameters": {"scan_interval_us": 30000000,
             "CPUBottleneck_threshold": "70", "LowGPUUtilization_window": 100}}],
  "checkpoint": {"dir": "/tmp/ckpt", "every_steps": 50, "resume": true, "keep": 0, "async": true},
  "collectives": {"timeout_ms": 60000, "transport": "shm", "allreduce_algo": "tcp_ring"},
  "logging": {"level": "DEBUG", "subsys": ["COLL", "NET"], "ranks": [0, 3], "file": "/tmp/s.%r.log"}
})";

TEST(ConfigDefaultsTest, EmptyObjectGivesSageMakerDefaults) {
  const JobConfig c = parseJobConfig("{}", "empty.json");
  EXPECT_EQ(c.source, "empty.json");
  EXPECT_FALSE(c.modelParallel.enabled);
  EXPECT_EQ(c.modelParallel.partitions, 1);
  EXPECT_EQ(c.modelParallel.microbatches, 1);
  EXPECT_EQ(c.modelParallel.pipeline, "interleaved");
  EXPECT_EQ(c.modelParallel.optimize, "speed");
  EXPECT_FALSE(c.modelParallel.ddp);
  EXPECT_TRUE(c.modelParallel.autoPartition);
  EXPECT_FALSE(c.modelParallel.memoryWeight.has_value());
  EXPECT_FALSE(c.modelParallel.memoryCapMb.has_value());
  EXPECT_FALSE(c.modelParallel.optimizerStateFactor.has_value());
  EXPECT_FALSE(c.modelParallel.activeMicrobatches.has_value());
  EXPECT_TRUE(c.dataParallel.enabled);
  EXPECT_DOUBLE_EQ(c.dataParallel.bucketCapMb, 25);
  EXPECT_EQ(c.dataParallel.bucketCapBytes(), 25u * 1024 * 1024);
  EXPECT_EQ(c.dataParallel.gradientDtype, "float32");
  EXPECT_FALSE(c.dataParallel.shardOptimizerState);
  EXPECT_EQ(c.outputDir, "runs/strata");
  EXPECT_FALSE(c.debugger.enabled());
  EXPECT_EQ(c.debugger.save.saveInterval, 500);
  EXPECT_EQ(c.debugger.includeWorkers, "one");
  EXPECT_FALSE(c.profiler.disableProfiler);
  EXPECT_EQ(c.profiler.systemMonitorInterval, std::chrono::milliseconds(500));
  EXPECT_FALSE(c.profiler.frameworkProfile.has_value());
  EXPECT_TRUE(c.rules.empty());
  EXPECT_EQ(c.checkpoint.dir, "runs/strata/ckpt");
  EXPECT_EQ(c.checkpoint.everySteps, 0);
  EXPECT_FALSE(c.checkpoint.resume);
  EXPECT_EQ(c.checkpoint.keep, 3);
  EXPECT_FALSE(c.checkpoint.async);
  EXPECT_EQ(c.collectives.timeout, std::chrono::milliseconds(300000));
  EXPECT_EQ(c.collectives.transport, "auto");
  EXPECT_EQ(c.collectives.allreduceAlgo, "auto");
  EXPECT_FALSE(c.logging.level.has_value());
  EXPECT_EQ(toJson(defaultJobConfig()), toJson(c));
}

TEST(ConfigDefaultsTest, EmptyFrameworkProfileIsStepFiveForOneStep) {
  const JobConfig c = parseJobConfig(R"({"profiler": {"framework_profile": {}}})", "j");
  ASSERT_TRUE(c.profiler.frameworkProfile.has_value());
  EXPECT_FALSE(c.profiler.frameworkProfile->byTime());
  EXPECT_EQ(c.profiler.frameworkProfile->startStep, 5);
  EXPECT_EQ(c.profiler.frameworkProfile->numSteps, 1);
}

TEST(ConfigParseTest, DesignExample) {
  const JobConfig c = parseJobConfig(kDesignExample, "design.json");
  EXPECT_TRUE(c.modelParallel.enabled);
  EXPECT_EQ(c.modelParallel.partitions, 2);
  EXPECT_EQ(c.modelParallel.microbatches, 4);
  EXPECT_TRUE(c.modelParallel.ddp);
  EXPECT_TRUE(c.dataParallel.enabled);
  EXPECT_EQ(c.outputDir, "runs/job-1");
  ASSERT_EQ(c.debugger.collections.size(), 3u);
  const CollectionConfig& losses = c.debugger.collections[0];
  EXPECT_EQ(losses.name, "losses");
  EXPECT_EQ(losses.save.saveInterval, 10);
  EXPECT_TRUE(losses.saveRawTensor);
  EXPECT_TRUE(losses.includeRegex.empty());
  const CollectionConfig& gradients = c.debugger.collections[1];
  EXPECT_EQ(gradients.reductions, std::vector<std::string>{"abs_mean"});
  EXPECT_FALSE(gradients.saveRawTensor);  // smdebug: reductions given, raw off unless asked
  const CollectionConfig& custom = c.debugger.collections[2];
  EXPECT_EQ(custom.includeRegex, std::vector<std::string>{".*relu_output"});
  EXPECT_EQ(custom.save.saveInterval, 50);
  EXPECT_EQ(custom.save.startStep, 0);
  ASSERT_TRUE(c.profiler.frameworkProfile.has_value());
  EXPECT_EQ(c.profiler.frameworkProfile->startStep, 2);
  EXPECT_EQ(c.profiler.frameworkProfile->numSteps, 7);
  ASSERT_EQ(c.rules.size(), 2u);
  EXPECT_EQ(c.rules[0].name, "LossNotDecreasing");
  EXPECT_TRUE(c.rules[0].stopsTraining());
  EXPECT_FALSE(c.rules[1].stopsTraining());
  EXPECT_EQ(c.rules[1].parameters.at("CPUBottleneck_cpu_threshold"), 90);
  EXPECT_EQ(c.checkpoint.dir, "runs/job-1/ckpt");
  EXPECT_EQ(c.checkpoint.everySteps, 100);
  EXPECT_TRUE(c.checkpoint.resume);
}

TEST(ConfigParseTest, EveryKey) {
  const JobConfig c = parseJobConfig(kEveryKey, "every.json");
  EXPECT_EQ(c.modelParallel.placementStrategy, "spread");
  EXPECT_EQ(c.modelParallel.manualPartition,
            (std::map<std::string, int>{{"embed", 0}, {"head", 3}}));
  EXPECT_EQ(c.modelParallel.activeMicrobatches, 6);
  EXPECT_EQ(c.modelParallel.memoryWeight, 0.25);
  EXPECT_EQ(c.modelParallel.memoryCapMb, 512);
  EXPECT_EQ(c.modelParallel.optimizerStateFactor, 1);
  EXPECT_EQ(c.dataParallel.gradientDtype, "bfloat16");
  EXPECT_TRUE(c.dataParallel.shardOptimizerState);
  EXPECT_TRUE(c.dataParallel.hostSharedParameters);
  EXPECT_EQ(c.debugger.save.saveSteps, (std::vector<int64_t>{1, 7}));  // sorted, deduplicated
  const CollectionConfig& weights = c.debugger.collections[0];
  EXPECT_EQ(weights.reductions, (std::vector<std::string>{"max", "l2_norm", "abs_l1_norm"}));
  EXPECT_TRUE(weights.saveRawTensor);
  EXPECT_EQ(weights.save.saveInterval, 20);  // inherited key by key from the debugger section
  EXPECT_EQ(weights.save.startStep, 3);
  EXPECT_EQ(weights.save.endStep, 1000);
  EXPECT_EQ(weights.save.saveSteps, (std::vector<int64_t>{1, 7}));
  const CollectionConfig& acts = c.debugger.collections[1];
  EXPECT_EQ(acts.includeRegex.size(), 2u);
  EXPECT_FALSE(acts.save.endStep.has_value());  // null overrides the inherited end
  EXPECT_TRUE(acts.save.saveSteps.empty());
  EXPECT_TRUE(c.profiler.frameworkProfile->byTime());
  EXPECT_EQ(*c.profiler.frameworkProfile->startUnixTime, std::chrono::seconds(1700000000));
  EXPECT_DOUBLE_EQ(c.profiler.frameworkProfile->duration->count(), 12.5);
  // SageMaker passes rule parameters as strings; they come out typed.
  EXPECT_EQ(c.rules[0].parameters.at("threshold"), 1e-7);
  EXPECT_EQ(c.rules[1].parameters.at("only_nan"), true);
  EXPECT_EQ(c.rules[1].parameters.at("collection_names"), "gradients,weights");
  EXPECT_EQ(c.rules[2].parameters.at("CPUBottleneck_threshold"), 70);
  EXPECT_EQ(c.checkpoint.keep, 0);
  EXPECT_TRUE(c.checkpoint.async);
  EXPECT_EQ(c.collectives.timeout, std::chrono::milliseconds(60000));
  EXPECT_EQ(c.logging.level, "DEBUG");
  EXPECT_EQ(c.logging.subsys, (std::vector<std::string>{"COLL", "NET"}));
  EXPECT_EQ(c.logging.ranks, (std::vector<int>{0, 3}));
}

TEST(ConfigParseTest, ModelParallelWithoutDdpTurnsDataParallelOff) {
  const JobConfig c =
      parseJobConfig(R"({"modelparallel": {"enabled": true, "partitions": 2}})", "j");
  EXPECT_FALSE(c.dataParallel.enabled);
}

TEST(ConfigParseTest, CheckpointDirFollowsOutputDir) {
  EXPECT_EQ(parseJobConfig(R"({"output_dir": "out"})", "j").checkpoint.dir, "out/ckpt");
}

class RoundTripTest : public ::testing::TestWithParam<const char*> {};

TEST_P(RoundTripTest, ToJsonParsesBackToTheSameSettings) {
  const nlohmann::json first = toJson(parseJobConfig(GetParam(), "in.json"));
  const nlohmann::json second = toJson(parseJobConfig(first.dump(2), "effective.json"));
  EXPECT_EQ(first, second) << first.dump(2) << "\n---\n" << second.dump(2);
  // Effective settings carry every section, defaults included.
  for (const char* key : {"modelparallel", "dataparallel", "output_dir", "debugger", "profiler",
                          "rules", "checkpoint", "collectives", "logging", "security"})
    EXPECT_TRUE(first.contains(key)) << key;
}

INSTANTIATE_TEST_SUITE_P(Configs, RoundTripTest,
                         ::testing::Values("{}", kDesignExample, kEveryKey));

TEST(ConfigJsonTest, EffectiveValuesAreResolved) {
  const nlohmann::json j = toJson(parseJobConfig(kDesignExample, "j"));
  EXPECT_EQ(j["checkpoint"]["keep"], 3);
  EXPECT_EQ(j["debugger"]["collections"][1]["save_raw_tensor"], false);
  EXPECT_EQ(j["debugger"]["collections"][2]["include_regex"],
            nlohmann::json::array({".*relu_output"}));
  EXPECT_EQ(j["collectives"]["timeout_ms"], 300000);
  EXPECT_EQ(j["profiler"]["framework_profile"],
            (nlohmann::json{{"start_step", 2}, {"num_steps", 7}}));
}

TEST(SaveConfigTest, SmdebugStepSelection) {
  SaveConfig s;
  s.saveInterval = 10;
  s.startStep = 5;
  s.endStep = 40;
  s.saveSteps = {3, 41};
  std::vector<int64_t> saved;
  for (int64_t step = 0; step < 50; ++step)
    if (s.shouldSave(step)) saved.push_back(step);
  // The interval is not relative to start_step; end_step is exclusive; listed steps always.
  EXPECT_EQ(saved, (std::vector<int64_t>{3, 10, 20, 30, 41}));
}

TEST(CheckWorldSizeTest, AcceptsConsistentLayouts) {
  EXPECT_NO_THROW(checkWorldSize(defaultJobConfig(), 1));
  EXPECT_NO_THROW(checkWorldSize(defaultJobConfig(), 8));
  EXPECT_NO_THROW(checkWorldSize(parseJobConfig(kDesignExample, "j"), 4));
  EXPECT_NO_THROW(checkWorldSize(
      parseJobConfig(R"({"modelparallel": {"enabled": true, "partitions": 2}})", "j"), 2));
}

TEST(CheckWorldSizeTest, RejectsInconsistentLayouts) {
  const auto message = [](const char* json, int worldSize) {
    try {
      checkWorldSize(parseJobConfig(json, "job.json"), worldSize);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(kDesignExample, 3)
                .find("job.json: /modelparallel/partitions: 2 does not divide the world size 3"),
            std::string::npos);
  EXPECT_NE(message(R"({"modelparallel": {"enabled": true, "partitions": 2}})", 4)
                .find("4 ranks holds 2 model replicas, but data parallelism is off "
                      "(/modelparallel/ddp is false)"),
            std::string::npos);
  EXPECT_NE(
      message(R"({"dataparallel": {"enabled": false}})", 2).find("/dataparallel/enabled is false"),
      std::string::npos);
  EXPECT_NE(message("{}", 0).find("world size 0"), std::string::npos);
}

TEST(CatalogTest, KnownNames) {
  const auto& rules = knownRuleNames();
  EXPECT_EQ(rules.size(), 30u);
  EXPECT_TRUE(isProfilerRule("ProfilerReport"));
  EXPECT_TRUE(isProfilerRule("Dataloader"));
  EXPECT_FALSE(isProfilerRule("VanishingGradient"));
  EXPECT_FALSE(isProfilerRule("NoSuchRule"));
  const auto& collections = builtinCollectionNames();
  EXPECT_NE(std::find(collections.begin(), collections.end(), "gradients"), collections.end());
}

}  // namespace
}  // namespace strata::config
