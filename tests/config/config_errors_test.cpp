// A table of malformed job configs, each with the message fragments it must produce. The
// fragments are the user-facing contract: the JSON pointer, the value echoed back, what is
// allowed, and the suggestion.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "core/errors.h"

namespace strata::config {
namespace {

struct BadConfig {
  const char* name;
  const char* json;
  std::vector<std::string> fragments;  // each must appear in the message
};

std::ostream& operator<<(std::ostream& os, const BadConfig& c) { return os << c.name; }

const BadConfig kBadConfigs[] = {
    // Unknown keys, at several depths, with and without a close match.
    {"UnknownTopLevel",
     R"({"modelparalel": {}})",
     {"job.json: unknown key \"modelparalel\" at /modelparalel; did you mean \"modelparallel\"?"}},
    {"UnknownInSection",
     R"({"modelparallel": {"partitons": 2}})",
     {"unknown key \"partitons\" at /modelparallel/partitons; did you mean \"partitions\"?"}},
    {"UnknownDepth3",
     R"({"profiler": {"framework_profile": {"start_stp": 1}}})",
     {"at /profiler/framework_profile/start_stp; did you mean \"start_step\"?"}},
    {"UnknownInArrayItem",
     R"({"debugger": {"collections": [{"name": "losses", "save_intervall": 10}]}})",
     {"at /debugger/collections/0/save_intervall; did you mean \"save_interval\"?"}},
    {"UnknownCaseOnly",
     R"({"dataparallel": {"Bucket_Cap_MB": 10}})",
     {"did you mean \"bucket_cap_mb\"?"}},
    {"UnknownListsValidKeys",
     R"({"checkpoint": {"zzz": 1}})",
     {"unknown key \"zzz\" at /checkpoint/zzz; valid keys here: \"dir\", \"every_steps\", "
      "\"resume\", \"keep\""}},
    {"UnknownContainment",
     R"({"rules": [{"name": "Overfit", "rule_parameters": {}}]})",
     {"at /rules/0/rule_parameters; did you mean \"parameters\"?"}},
    // Wrong types.
    {"StringForInt",
     R"({"modelparallel": {"enabled": true, "partitions": "two"}})",
     {"job.json: /modelparallel/partitions: expected an integer >= 1, got \"two\""}},
    {"FloatForInt",
     R"({"modelparallel": {"microbatches": 2.5}})",
     {"/modelparallel/microbatches: expected an integer >= 1, got 2.5"}},
    {"BoolForInt",
     R"({"checkpoint": {"every_steps": true}})",
     {"/checkpoint/every_steps: expected an integer >= 0, got true"}},
    {"StringForBool",
     R"({"checkpoint": {"resume": "yes"}})",
     {"/checkpoint/resume: expected true or false, got \"yes\""}},
    {"NumberForString",
     R"({"output_dir": 7})",
     {"/output_dir: expected a non-empty string, got 7"}},
    {"EmptyString",
     R"({"output_dir": ""})",
     {"/output_dir: expected a non-empty string, got \"\""}},
    {"SectionNotObject",
     R"({"dataparallel": [1, 2]})",
     {"/dataparallel: expected an object, got [1,2]"}},
    {"RootNotObject", R"([1])", {"job.json: (root): expected an object, got [1]"}},
    {"RulesNotArray",
     R"({"rules": {"name": "Overfit"}})",
     {"/rules: expected an array, got {\"name\":\"Overfit\"}"}},
    {"LongValueTruncated",
     R"({"output_dir": ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"]})",
     {"got [\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"bbbbbbbbbbbbbbbbbbbbbb..."}},
    // Out of range.
    {"MicrobatchesZero",
     R"({"modelparallel": {"microbatches": 0}})",
     {"/modelparallel/microbatches: expected an integer >= 1, got 0"}},
    {"PartitionsOverflow",
     R"({"modelparallel": {"enabled": true, "partitions": 4294967296}})",
     {"expected an integer in [1, 2147483647], got 4294967296"}},
    {"BucketCapZero",
     R"({"dataparallel": {"bucket_cap_mb": 0}})",
     {"/dataparallel/bucket_cap_mb: expected a number in (0, 65536], got 0"}},
    {"MemoryWeight",
     R"({"modelparallel": {"memory_weight": 1.5}})",
     {"/modelparallel/memory_weight: expected a number in [0, 1], got 1.5"}},
    {"MemoryCapZero",
     R"({"modelparallel": {"memory_cap_mb": 0}})",
     {"/modelparallel/memory_cap_mb: expected a number > 0, got 0"}},
    {"OptimizerStateFactorNegative",
     R"({"modelparallel": {"optimizer_state_factor": -1}})",
     {"/modelparallel/optimizer_state_factor: expected a number in [0, 64], got -1"}},
    {"TimeoutZero",
     R"({"collectives": {"timeout_ms": 0}})",
     {"/collectives/timeout_ms: expected an integer in [1, 86400000], got 0"}},
    {"KeepNegative",
     R"({"checkpoint": {"keep": -1}})",
     {"/checkpoint/keep: expected an integer >= 0, got -1"}},
    {"ShardNotBool",
     R"({"dataparallel": {"shard_optimizer_state": 1}})",
     {"/dataparallel/shard_optimizer_state: expected true or false, got 1"}},
    {"HostSharedNeedsShard",
     R"({"dataparallel": {"host_shared_parameters": true}})",
     {"/dataparallel/host_shared_parameters: true needs \"shard_optimizer_state\": true"}},
    {"AsyncNotBool",
     R"({"checkpoint": {"async": "yes"}})",
     {"/checkpoint/async: expected true or false, got \"yes\""}},
    {"MonitorInterval",
     R"({"profiler": {"system_monitor_interval_millis": 300}})",
     {"/profiler/system_monitor_interval_millis: 300 is not one of 100, 200, 500, 1000, 5000, "
      "60000"}},
    {"NumStepsZero",
     R"({"profiler": {"framework_profile": {"num_steps": 0}}})",
     {"/profiler/framework_profile/num_steps: expected an integer >= 1, got 0"}},
    // Enums.
    {"BadPipeline",
     R"({"modelparallel": {"pipeline": "fast"}})",
     {"/modelparallel/pipeline: \"fast\" is not one of \"simple\", \"interleaved\""}},
    {"EnumSuggestion",
     R"({"collectives": {"transport": "tpc"}})",
     {"/collectives/transport: \"tpc\" is not one of \"auto\", \"shm\", \"tcp\"; did you "
      "mean \"tcp\"?"}},
    {"EnumWrongType",
     R"({"dataparallel": {"gradient_dtype": 16}})",
     {"/dataparallel/gradient_dtype: expected one of \"float32\", \"float16\", \"bfloat16\", got "
      "16"}},
    {"LogSubsys",
     R"({"logging": {"subsys": "COLL,COL"}})",
     {"/logging/subsys: \"COL\" is not a subsystem; did you mean \"COLL\"?"}},
    // JSON syntax and duplicates.
    {"TrailingComma",
     "{\n  \"output_dir\": \"x\",\n}",
     {"job.json:3:1 (byte 24): invalid JSON: syntax error", "unexpected '}'"}},
    {"Truncated",
     R"({"modelparallel": {)",
     {"job.json:1:20 (byte 20): invalid JSON:", "unexpected end of input"}},
    {"EmptyFile", "", {"job.json:1:1 (byte 1): invalid JSON:"}},
    {"DuplicateKey",
     R"({"output_dir": "a", "output_dir": "b"})",
     {"job.json: /output_dir: key appears twice in the same object"}},
    {"DuplicateKeyNested",
     R"({"debugger": {"collections": [{"name": "losses"}, {"name": "a", "name": "b"}]}})",
     {"/debugger/collections/1/name: key appears twice"}},
    // Debugger collections.
    {"BadRegex",
     R"({"debugger": {"collections": [{"name": "relu", "include_regex": "(relu"}]}})",
     {"/debugger/collections/0/include_regex: invalid regular expression \"(relu\" (ECMAScript "
      "syntax): "}},
    {"BadRegexInList",
     R"({"debugger": {"collections": [{"name": "relu", "include_regex": ["ok", "a[b"]}]}})",
     {"/debugger/collections/0/include_regex/1: invalid regular expression \"a[b\""}},
    {"CustomNeedsRegex",
     R"({"debugger": {"collections": [{"name": "gradient"}]}})",
     {"/debugger/collections/0: \"gradient\" is not a built-in collection (did you mean "
      "\"gradients\"?), so it needs "
      "\"include_regex\"; built-in collections: \"all\""}},
    {"CollectionNameChars",
     R"({"debugger": {"collections": [{"name": "a/b", "include_regex": "x"}]}})",
     {"/debugger/collections/0/name: \"a/b\" may use only letters, digits"}},
    {"CollectionNeedsName",
     R"({"debugger": {"collections": [{"save_interval": 3}]}})",
     {"/debugger/collections/0: a collection needs a \"name\""}},
    {"BadReduction",
     R"({"debugger": {"collections": [{"name": "weights", "reductions": ["max", "abs_meen"]}]}})",
     {"/debugger/collections/0/reductions: \"abs_meen\" is not a reduction; did you mean "
      "\"abs_mean\"?"}},
    {"DuplicateReduction",
     R"({"debugger": {"collections": [{"name": "weights", "reductions": "l2, l2_norm"}]}})",
     {"reduction \"l2_norm\" is listed twice"}},
    {"ReductionOnScalars",
     R"({"debugger": {"collections": [{"name": "losses", "reductions": ["mean"]}]}})",
     {"/debugger/collections/0/reductions: collection \"losses\" holds scalars"}},
    {"SavesNothing",
     R"({"debugger": {"collections": [{"name": "weights", "save_raw_tensor": false}]}})",
     {"/debugger/collections/0: collection \"weights\" would save nothing"}},
    {"EndBeforeStart",
     R"({"debugger": {"collections": [{"name": "weights", "start_step": 10, "end_step": 5}]}})",
     {"/debugger/collections/0/end_step: end_step 5 must be greater than start_step 10"}},
    {"DuplicateCollection",
     R"({"debugger": {"collections": [{"name": "losses"}, {"name": "losses"}]}})",
     {"/debugger/collections/1/name: collection \"losses\" is already configured at "
      "/debugger/collections/0"}},
    {"IncludeWorkers",
     R"({"debugger": {"include_workers": "some"}})",
     {"\"some\" is not one of \"one\", \"all\""}},
    // Rules.
    {"UnknownRuleSuggestion",
     R"({"rules": [{"name": "LossNotDecrasing"}]})",
     {"/rules/0/name: unknown rule \"LossNotDecrasing\"; did you mean \"LossNotDecreasing\"?"}},
    {"UnknownRuleCase",
     R"({"rules": [{"name": "Overfit"}, {"name": "cpubottleneck"}]})",
     {"/rules/1/name: unknown rule \"cpubottleneck\"; did you mean \"CPUBottleneck\"?"}},
    {"UnknownRuleList",
     R"({"rules": [{"name": "Zzz"}]})",
     {"unknown rule \"Zzz\"; known rules: \"VanishingGradient\", "}},
    {"XgboostRule",
     R"({"rules": [{"name": "TreeDepth"}]})",
     {"/rules/0/name: \"TreeDepth\" is an XGBoost-only rule"}},
    {"RuleNeedsName", R"({"rules": [{"actions": []}]})", {"/rules/0: a rule needs a \"name\""}},
    {"UnknownRuleParam",
     R"({"rules": [{"name": "VanishingGradient", "parameters": {"treshold": 1}}]})",
     {"unknown key \"treshold\" at /rules/0/parameters/treshold; did you mean \"threshold\"?"}},
    {"UnknownSubRuleParam",
     R"({"rules": [{"name": "ProfilerReport", "parameters": {"CPUBottleneck_cpu_treshold": 9}}]})",
     {"at /rules/0/parameters/CPUBottleneck_cpu_treshold; did you mean "
      "\"CPUBottleneck_cpu_threshold\"?"}},
    {"RuleParamRange",
     R"({"rules": [{"name": "CPUBottleneck", "parameters": {"threshold": 120}}]})",
     {"/rules/0/parameters/threshold: expected a number in [0, 100], got 120"}},
    {"RuleParamNotNumeric",
     R"({"rules": [{"name": "CPUBottleneck", "parameters": {"threshold": "high"}}]})",
     {"/rules/0/parameters/threshold: expected a number in [0, 100], got \"high\""}},
    {"RuleParamBool",
     R"({"rules": [{"name": "ExplodingTensor", "parameters": {"only_nan": "maybe"}}]})",
     {"/rules/0/parameters/only_nan: expected true or false, got \"maybe\""}},
    {"RuleParamRegex",
     R"({"rules": [{"name": "DeadRelu", "parameters": {"tensor_regex": "["}}]})",
     {"/rules/0/parameters/tensor_regex: invalid regular expression \"[\""}},
    {"RuleParamMode",
     R"({"rules": [{"name": "LossNotDecreasing", "parameters": {"mode": "TRAINING"}}]})",
     {"\"TRAINING\" is not one of \"GLOBAL\", \"TRAIN\", \"EVAL\", \"PREDICT\"; did you mean "
      "\"TRAIN\"?"}},
    {"RuleRequiredParam",
     R"({"rules": [{"name": "SimilarAcrossRuns"}]})",
     {"/rules/0/parameters: rule \"SimilarAcrossRuns\" needs the parameter \"other_trials\""}},
    {"RuleAnyOfParam",
     R"({"rules": [{"name": "AllZero", "parameters": {"threshold": 50}}]})",
     {"rule \"AllZero\" needs at least one of \"collection_names\", \"tensor_regex\""}},
    {"ActionEmail",
     R"({"rules": [{"name": "Overfit", "actions": ["StopTraining", "Email"]}]})",
     {"/rules/0/actions/1: \"Email\" needs SageMaker's notification service"}},
    {"ActionTypo",
     R"({"rules": [{"name": "Overfit", "actions": ["StopTrainig"]}]})",
     {"/rules/0/actions/0: \"StopTrainig\" is not one of \"StopTraining\"; did you mean "
      "\"StopTraining\"?"}},
    {"DuplicateRule",
     R"({"rules": [{"name": "Overfit"}, {"name": "Overfit"}]})",
     {"/rules/1/name: rule \"Overfit\" is already configured at /rules/0"}},
    // Checks across fields and sections.
    {"PartitionsNeedEnabled",
     R"({"modelparallel": {"partitions": 2}})",
     {"/modelparallel/partitions: partitions 2 needs \"enabled\": true"}},
    {"DdpNeedsEnabled",
     R"({"modelparallel": {"ddp": true}})",
     {"/modelparallel/ddp: \"ddp\" joins pipeline replicas"}},
    {"DataParallelContradictsDdp",
     R"({"modelparallel": {"enabled": true}, "dataparallel": {"enabled": true}})",
     {"/dataparallel/enabled: true contradicts /modelparallel/ddp false"}},
    {"DefaultPartitionRange",
     R"({"modelparallel": {"enabled": true, "partitions": 2, "default_partition": 2}})",
     {"/modelparallel/default_partition: partition 2 does not exist: partitions is 2, so valid "
      "ones are 0..1"}},
    {"ManualPartitionRange",
     R"({"modelparallel": {"enabled": true, "partitions": 2, "auto_partition": false, "manual_partition": {"fc1": 3}}})",
     {"/modelparallel/manual_partition/fc1: partition 3 does not exist"}},
    {"ManualNeedsAutoOff",
     R"({"modelparallel": {"enabled": true, "partitions": 2, "manual_partition": {"fc1": 1}}})",
     {"/modelparallel/manual_partition: manual placement needs \"auto_partition\": false"}},
    {"ProfileStepsAndTime",
     R"({"profiler": {"framework_profile": {"start_step": 1, "start_unix_time": 1700000000, "duration": 5}}})",
     {"/profiler/framework_profile: give a step range", "not both"}},
    {"ProfileTimeNeedsDuration",
     R"({"profiler": {"framework_profile": {"start_unix_time": 1700000000}}})",
     {"/profiler/framework_profile: \"start_unix_time\" needs \"duration\""}},
    {"MallocPolicyUnknown", R"({"memory": {"malloc": "jemalloc"}})", {"/memory/malloc", "jemalloc", "retain"}},
    {"MemoryKeyUnknown", R"({"memory": {"malloc_policy": "retain"}})", {"/memory", "malloc_policy"}},
};

class BadConfigTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(BadConfigTest, ThrowsPreciseMessage) {
  const BadConfig& c = GetParam();
  try {
    parseJobConfig(c.json, "job.json");
    FAIL() << "accepted: " << c.json;
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    for (const std::string& fragment : c.fragments)
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "missing: " << fragment << "\nin: " << message;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, BadConfigTest, ::testing::ValuesIn(kBadConfigs),
                         [](const ::testing::TestParamInfo<BadConfig>& info) {
                           return info.param.name;
                         });

// ConfigError carries the rank tag like every other Strata error.
TEST(ConfigErrorTest, MessageStartsWithRankTag) {
  try {
    parseJobConfig(R"({"x": 1})", "job.json");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(rankTag() + " job.json: unknown key", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace strata::config
