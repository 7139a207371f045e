#include "rules/builtin.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "rules/declarations.h"

namespace strata::rules {
namespace {

using Factory = std::unique_ptr<Rule> (*)(const nlohmann::json&, const BuiltinContext&);

struct Entry {
  const char* name;
  Factory make;
  bool metric;
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> kEntries = {
      {"VanishingGradient", makeVanishingGradient, false},
      {"ExplodingTensor", makeExplodingTensor, false},
      {"AllZero", makeAllZero, false},
      {"UnchangedTensor", makeUnchangedTensor, false},
      {"LossNotDecreasing", makeLossNotDecreasing, false},
      {"Overfit", makeOverfit, false},
      {"Overtraining", makeOvertraining, false},
      {"StalledTrainingRule", makeStalledTraining, false},
      {"WeightUpdateRatio", makeWeightUpdateRatio, false},
      {"TensorVariance", makeTensorVariance, false},
      {"PoorWeightInitialization", makePoorWeightInitialization, false},
      {"SaturatedActivation", makeSaturatedActivation, false},
      {"DeadRelu", makeDeadRelu, false},
      {"ClassImbalance", makeClassImbalance, false},
      {"Confusion", makeConfusion, false},
      {"CPUBottleneck", makeCpuBottleneck, true},
      {"IOBottleneck", makeIoBottleneck, true},
      {"LowGPUUtilization", makeLowGpuUtilization, true},
      {"GPUMemoryIncrease", makeGpuMemoryIncrease, true},
      {"BatchSize", makeBatchSize, true},
      {"LoadBalancing", makeLoadBalancing, true},
      {"MaxInitializationTime", makeMaxInitializationTime, true},
      {"StepOutlier", makeStepOutlier, true},
      {"Dataloader", makeDataloader, true},
      {"OverallSystemUsage", makeOverallSystemUsage, true},
      {"OverallFrameworkMetrics", makeOverallFrameworkMetrics, true},
  };
  return kEntries;
}

const Entry* find(const std::string& name) {
  for (const Entry& e : entries())
    if (name == e.name) return &e;
  return nullptr;
}

}  // namespace

bool isBuiltinRule(const std::string& name) { return find(name) != nullptr || name == "ProfilerReport"; }

bool isBuiltinMetricRule(const std::string& name) {
  const Entry* e = find(name);
  return name == "ProfilerReport" || (e != nullptr && e->metric);
}

const std::vector<std::string>& builtinRuleNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const Entry& e : entries()) names.push_back(e.name);
    names.push_back("ProfilerReport");
    return names;
  }();
  return kNames;
}

int64_t scanIntervalOf(const nlohmann::json& params) {
  auto it = params.find(kScanIntervalParam.name);
  if (it == params.end() || it->is_null()) return kScanIntervalParam.def.get<int64_t>();
  double v = 0;
  if (it->is_number()) {
    v = it->get<double>();
  } else if (it->is_string()) {
    try {
      v = std::stod(it->get<std::string>());
    } catch (...) {
      v = 0;
    }
  }
  if (!(v >= 1)) throw std::invalid_argument("scan_interval_us must be a positive number of µs, got " + it->dump());
  return static_cast<int64_t>(v);
}

std::unique_ptr<Rule> makeBuiltinRule(const std::string& name, const nlohmann::json& params,
                                      const BuiltinContext& ctx) {
  const Entry* e = find(name);
  if (e == nullptr) {
    if (name == "ProfilerReport")
      throw std::invalid_argument("ProfilerReport is a group of rules: use makeProfilerReportRules");
    if (findRuleDecl(name) != nullptr)
      throw std::invalid_argument("rule \"" + name + "\" is not implemented by Strata (see docs/rules.md)");
    throw std::invalid_argument("unknown rule \"" + name + "\"");
  }
  return e->make(params.is_null() ? nlohmann::json::object() : params, ctx);
}

std::vector<std::unique_ptr<Rule>> makeProfilerReportRules(const nlohmann::json& params, const BuiltinContext& ctx,
                                                           const std::vector<std::string>& skip,
                                                           int64_t* scanIntervalUs) {
  const nlohmann::json given = params.is_null() ? nlohmann::json::object() : params;
  BuiltinContext sub = ctx;
  sub.inProfilerReport = true;
  std::map<std::string, nlohmann::json> perRule;
  for (const std::string& r : profilerReportSubRules()) perRule[r] = nlohmann::json::object();
  const RuleDecl& report = builtinDecl("ProfilerReport");
  for (const auto& item : given.items()) {
    const std::string& key = item.key();
    if (key == kCompatParam.name) {
      for (auto& kv : perRule) kv.second["compat"] = item.value();
      continue;
    }
    if (findParam(report, key) != nullptr) continue;  // ProfilerReport's own
    const size_t underscore = key.find('_');
    const std::string rule = underscore == std::string::npos ? key : key.substr(0, underscore);
    if (underscore == std::string::npos || !perRule.count(rule))
      throw std::invalid_argument("ProfilerReport: unknown parameter \"" + key +
                                  "\" (expected <Rule>_<parameter>, e.g. CPUBottleneck_threshold)");
    perRule[rule][key.substr(underscore + 1)] = item.value();
  }
  const int64_t scan = scanIntervalOf(given);
  if (scanIntervalUs != nullptr) *scanIntervalUs = scan;
  std::vector<std::unique_ptr<Rule>> rules;
  for (const std::string& r : profilerReportSubRules()) {
    if (std::find(skip.begin(), skip.end(), r) != skip.end()) continue;
    nlohmann::json p = perRule[r];
    if (p.contains("scan_interval_us"))
      throw std::invalid_argument("ProfilerReport: " + r + "_scan_interval_us: sub-rules share ProfilerReport's scan_interval_us");
    rules.push_back(makeBuiltinRule(r, p, sub));
  }
  return rules;
}

}  // namespace strata::rules
