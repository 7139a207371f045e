// The rule table. Parameter names are SageMaker's (rulesconfig and the AWS "List of
// Debugger built-in rules" page, newer copy where the two differ), as collected in
// specs/smdebug.md §3. scan_interval_us belongs to every profiler rule's base class.
#include "config/rule_catalog.h"

#include <algorithm>

namespace strata::config::detail {
namespace {

using K = ParamKind;

const ParamSpec kScan{"scan_interval_us", K::kPositive};
const ParamSpec kPatience{"patience", K::kCount};
const ParamSpec kCollectionNames{"collection_names", K::kString};
const ParamSpec kTensorRegex{"tensor_regex", K::kRegex};

std::vector<RuleSpec> makeSpecs() {
  return {
      // Debugger (tensor) rules, §3.2.
      {"VanishingGradient", false, {{"threshold", K::kNonNegative}}, {}, {}},
      {"ExplodingTensor", false, {kCollectionNames, kTensorRegex, {"only_nan", K::kBool}}, {}, {}},
      {"AllZero",
       false,
       {kCollectionNames, kTensorRegex, {"threshold", K::kPercent}},
       {},
       {"collection_names", "tensor_regex"}},
      {"UnchangedTensor",
       false,
       {kCollectionNames,
        kTensorRegex,
        {"num_steps", K::kPositiveInt},
        {"rtol", K::kNonNegative},
        {"atol", K::kNonNegative},
        {"equal_nan", K::kBool}},
       {},
       {}},
      {"LossNotDecreasing",
       false,
       {kCollectionNames,
        kTensorRegex,
        {"use_losses_collection", K::kBool},
        {"num_steps", K::kPositiveInt},
        {"diff_percent", K::kNonNegative},
        {"increase_threshold_percent", K::kNonNegative},
        {"mode", K::kMode},
        {"smoothing", K::kString},
        {"smoothing_window", K::kPositiveInt}},
       {},
       {}},
      {"Overfit",
       false,
       {kTensorRegex, {"start_step", K::kCount}, kPatience, {"ratio_threshold", K::kNonNegative}},
       {},
       {}},
      {"Overtraining",
       false,
       {{"patience_train", K::kCount},
        {"patience_validation", K::kCount},
        {"delta", K::kNonNegative}},
       {},
       {}},
      {"StalledTrainingRule",
       false,
       {{"threshold", K::kNonNegative},
        {"stop_training_on_fire", K::kBool},
        {"training_job_name_prefix", K::kString}},
       {},
       {}},
      {"WeightUpdateRatio",
       false,
       {{"num_steps", K::kPositiveInt},
        {"large_threshold", K::kNonNegative},
        {"small_threshold", K::kNonNegative},
        {"epsilon", K::kNonNegative}},
       {},
       {}},
      {"TensorVariance",
       false,
       {kCollectionNames,
        kTensorRegex,
        {"max_threshold", K::kNonNegative},
        {"min_threshold", K::kNonNegative}},
       {},
       {}},
      {"PoorWeightInitialization",
       false,
       {{"activation_inputs_regex", K::kRegex},
        {"threshold", K::kNonNegative},
        {"distribution_range", K::kNonNegative},
        kPatience,
        {"steps", K::kPositiveInt}},
       {},
       {}},
      {"SaturatedActivation",
       false,
       {kCollectionNames,
        kTensorRegex,
        {"threshold_tanh_min", K::kNumber},
        {"threshold_tanh_max", K::kNumber},
        {"threshold_sigmoid_min", K::kNumber},
        {"threshold_sigmoid_max", K::kNumber},
        {"threshold_inactivity", K::kPercent},
        {"threshold_layer", K::kPercent}},
       {},
       {}},
      {"DeadRelu",
       false,
       {kTensorRegex, {"threshold_inactivity", K::kPercent}, {"threshold_layer", K::kPercent}},
       {},
       {}},
      {"ClassImbalance",
       false,
       {{"threshold_imbalance", K::kNonNegative},
        {"threshold_misprediction", K::kFraction},
        {"samples", K::kPositiveInt},
        {"argmax", K::kBool},
        {"labels_regex", K::kRegex},
        {"predictions_regex", K::kRegex}},
       {},
       {}},
      {"Confusion",
       false,
       {{"category_no", K::kPositiveInt},
        {"labels", K::kString},
        {"predictions", K::kString},
        {"labels_collection", K::kString},
        {"predictions_collection", K::kString},
        {"min_diag", K::kFraction},
        {"max_off_diag", K::kFraction}},
       {},
       {}},
      {"CheckInputImages",
       false,
       {{"threshold_mean", K::kNonNegative},
        {"threshold_samples", K::kPositiveInt},
        {"regex", K::kRegex},
        {"channel", K::kCount}},
       {},
       {}},
      {"NLPSequenceRatio",
       false,
       {kTensorRegex, {"token_values", K::kString}, {"token_thresholds_percent", K::kString}},
       {},
       {}},
      {"SimilarAcrossRuns",
       false,
       {{"other_trials", K::kString}, kCollectionNames, kTensorRegex},
       {"other_trials"},
       {}},
      // Profiler rules, §3.1.
      {"CPUBottleneck",
       true,
       {{"threshold", K::kPercent},
        {"gpu_threshold", K::kPercent},
        {"cpu_threshold", K::kPercent},
        kPatience,
        kScan},
       {},
       {}},
      {"IOBottleneck",
       true,
       {{"threshold", K::kPercent},
        {"gpu_threshold", K::kPercent},
        {"io_threshold", K::kPercent},
        kPatience,
        kScan},
       {},
       {}},
      {"LowGPUUtilization",
       true,
       {{"threshold_p95", K::kPercent},
        {"threshold_p5", K::kPercent},
        {"window", K::kPositiveInt},
        kPatience,
        kScan},
       {},
       {}},
      {"GPUMemoryIncrease",
       true,
       {{"increase", K::kPercent}, kPatience, {"window", K::kPositiveInt}, kScan},
       {},
       {}},
      {"BatchSize",
       true,
       {{"cpu_threshold_p95", K::kPercent},
        {"gpu_threshold_p95", K::kPercent},
        {"gpu_memory_threshold_p95", K::kPercent},
        kPatience,
        {"window", K::kPositiveInt},
        kScan},
       {},
       {}},
      {"LoadBalancing", true, {{"threshold", K::kFraction}, kPatience, kScan}, {}, {}},
      {"MaxInitializationTime", true, {{"threshold", K::kNonNegative}, kScan}, {}, {}},
      {"StepOutlier",
       true,
       {{"stddev", K::kNonNegative}, {"mode", K::kString}, {"n_outliers", K::kCount}, kScan},
       {},
       {}},
      {"Dataloader",
       true,
       {{"min_threshold", K::kNonNegative}, {"max_threshold", K::kNonNegative}, kPatience, kScan,
        {"wait_threshold", K::kNonNegative}},  // Strata: % of a step spent waiting for data
       {},
       {}},
      {"OverallSystemUsage", true, {kScan}, {}, {}},
      {"OverallFrameworkMetrics", true, {kScan}, {}, {}},
      {"ProfilerReport",
       true,
       {kScan, {"nb_path", K::kString}, {"opt_out_telemetry", K::kBool}},
       {},
       {}},
  };
}

}  // namespace

const std::vector<RuleSpec>& ruleSpecs() {
  static const std::vector<RuleSpec> kSpecs = makeSpecs();
  return kSpecs;
}

const RuleSpec* findRuleSpec(const std::string& name) {
  for (const RuleSpec& spec : ruleSpecs())
    if (spec.name == name) return &spec;
  return nullptr;
}

bool isXgboostRule(const std::string& name) {
  return name == "FeatureImportanceOverweight" || name == "TreeDepth" ||
         name == "CreateXgboostReport";
}

const std::vector<std::string>& profilerReportSubRules() {
  static const std::vector<std::string> kNames = {
      "CPUBottleneck",      "IOBottleneck", "LowGPUUtilization",      "StepOutlier",
      "GPUMemoryIncrease",  "BatchSize",    "MaxInitializationTime",  "LoadBalancing",
      "OverallSystemUsage", "Dataloader",   "OverallFrameworkMetrics"};
  return kNames;
}

std::vector<std::string> parameterKeys(const RuleSpec& rule) {
  std::vector<std::string> keys;
  for (const ParamSpec& p : rule.params) keys.push_back(p.name);
  if (rule.name != "ProfilerReport") return keys;
  // ProfilerReport scans once for all sub-rules, so their scan_interval_us has no meaning.
  for (const std::string& sub : profilerReportSubRules()) {
    for (const ParamSpec& p : findRuleSpec(sub)->params)
      if (p.name != kScan.name) keys.push_back(sub + "_" + p.name);
  }
  return keys;
}

const ParamSpec* findParamSpec(const RuleSpec& rule, const std::string& key) {
  for (const ParamSpec& p : rule.params)
    if (p.name == key) return &p;
  if (rule.name != "ProfilerReport") return nullptr;
  // Rule names contain no '_', so the first one separates "<SubRule>_<param>".
  const size_t underscore = key.find('_');
  if (underscore == std::string::npos) return nullptr;
  const std::string sub = key.substr(0, underscore);
  const auto& subs = profilerReportSubRules();
  if (std::find(subs.begin(), subs.end(), sub) == subs.end()) return nullptr;
  const std::string param = key.substr(underscore + 1);
  if (param == kScan.name) return nullptr;
  for (const ParamSpec& p : findRuleSpec(sub)->params)
    if (p.name == param) return &p;
  return nullptr;
}

}  // namespace strata::config::detail
