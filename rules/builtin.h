// The built-in rules: names, factories, and what ProfilerReport runs.
// Internal to rules/; the engine and the tests use it.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/rules.h"

namespace strata::rules {

// How a built-in rule is created.
struct BuiltinContext {
  // Reproduce the reference's verdicts, bugs included (docs/rules.md "compat mode"). A rule's
  // own "compat" parameter overrides this.
  bool compat = false;
  // Created by ProfilerReport (MaxInitializationTime is inert there in compat mode).
  bool inProfilerReport = false;
};

bool isBuiltinRule(const std::string& name);
bool isBuiltinMetricRule(const std::string& name);
// Every built-in rule name, tensor rules first.
const std::vector<std::string>& builtinRuleNames();

// Creates one built-in rule (not ProfilerReport, see makeProfilerReportRules). Throws
// std::invalid_argument on an unknown name or bad or unknown parameters.
std::unique_ptr<Rule> makeBuiltinRule(const std::string& name, const nlohmann::json& params,
                                      const BuiltinContext& ctx);

// ProfilerReport's sub-rules, in the reference's order, with "<Rule>_<param>" overrides taken
// from `params` and a shared scan interval. Sub-rules named in `skip` are left out (they are
// configured on their own). Also returns the effective scan interval.
std::vector<std::unique_ptr<Rule>> makeProfilerReportRules(const nlohmann::json& params,
                                                           const BuiltinContext& ctx,
                                                           const std::vector<std::string>& skip,
                                                           int64_t* scanIntervalUs);

// The scan interval a metric rule's parameters ask for (default 60 s).
int64_t scanIntervalOf(const nlohmann::json& params);

// Per-rule factories (one per source file).
std::unique_ptr<Rule> makeCpuBottleneck(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeIoBottleneck(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeLowGpuUtilization(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeGpuMemoryIncrease(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeBatchSize(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeLoadBalancing(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeMaxInitializationTime(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeStepOutlier(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeDataloader(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeOverallSystemUsage(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeOverallFrameworkMetrics(const nlohmann::json& p, const BuiltinContext& c);

std::unique_ptr<Rule> makeLossNotDecreasing(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeOverfit(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeOvertraining(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeStalledTraining(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeVanishingGradient(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeExplodingTensor(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeWeightUpdateRatio(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeAllZero(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeUnchangedTensor(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeTensorVariance(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeDeadRelu(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeSaturatedActivation(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makePoorWeightInitialization(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeClassImbalance(const nlohmann::json& p, const BuiltinContext& c);
std::unique_ptr<Rule> makeConfusion(const nlohmann::json& p, const BuiltinContext& c);

}  // namespace strata::rules
