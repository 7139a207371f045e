// The registry of built-in rule declarations: the families' tables joined, and the lookups the
// config validation and the rule constructors share.
#include "rules/declarations.h"

#include <algorithm>
#include <stdexcept>

namespace strata::rules {

const ParamDecl kScanIntervalParam{"scan_interval_us", ParamKind::kPositive, 60000000};
const ParamDecl kCompatParam{"compat", ParamKind::kBool, false, /*inJobConfig=*/false};

RuleDecl tensorRuleDecl(std::string name, std::vector<ParamDecl> params,
                        std::vector<std::string> anyOf) {
  params.push_back(kCompatParam);
  return RuleDecl{std::move(name), false, true, std::move(params), {}, std::move(anyOf)};
}

RuleDecl metricRuleDecl(std::string name, std::vector<ParamDecl> params) {
  params.push_back(kScanIntervalParam);
  params.push_back(kCompatParam);
  return RuleDecl{std::move(name), true, true, std::move(params), {}, {}};
}

RuleDecl configOnlyRuleDecl(std::string name, std::vector<ParamDecl> params,
                            std::vector<std::string> required) {
  return RuleDecl{std::move(name), false, false, std::move(params), std::move(required), {}};
}

const std::vector<RuleDecl>& builtinRuleDecls() {
  static const std::vector<RuleDecl> kDecls = [] {
    std::vector<RuleDecl> all = trainingRuleDecls();
    for (RuleDecl& d : profilerRuleDecls()) all.push_back(std::move(d));
    return all;
  }();
  return kDecls;
}

const RuleDecl* findRuleDecl(const std::string& name) {
  for (const RuleDecl& decl : builtinRuleDecls())
    if (decl.name == name) return &decl;
  return nullptr;
}

const RuleDecl& builtinDecl(const std::string& name) {
  const RuleDecl* decl = findRuleDecl(name);
  if (decl == nullptr) throw std::logic_error("rule \"" + name + "\" has no parameter declaration");
  return *decl;
}

const ParamDecl* findParam(const RuleDecl& rule, const std::string& key) {
  for (const ParamDecl& p : rule.params)
    if (p.name == key) return &p;
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

namespace {

// A sub-rule parameter ProfilerReport may override: its scan runs once for all sub-rules, so
// their scan_interval_us has no meaning there.
bool overridable(const ParamDecl& p) { return p.inJobConfig && p.name != kScanIntervalParam.name; }

}  // namespace

std::vector<std::string> jobConfigKeys(const RuleDecl& rule) {
  std::vector<std::string> keys;
  for (const ParamDecl& p : rule.params)
    if (p.inJobConfig) keys.push_back(p.name);
  if (rule.name != "ProfilerReport") return keys;
  for (const std::string& sub : profilerReportSubRules()) {
    for (const ParamDecl& p : builtinDecl(sub).params)
      if (overridable(p)) keys.push_back(sub + "_" + p.name);
  }
  return keys;
}

const ParamDecl* findJobConfigParam(const RuleDecl& rule, const std::string& key) {
  const ParamDecl* own = findParam(rule, key);
  if (own != nullptr) return own->inJobConfig ? own : nullptr;
  if (rule.name != "ProfilerReport") return nullptr;
  // Rule names contain no '_', so the first one separates "<SubRule>_<param>".
  const size_t underscore = key.find('_');
  if (underscore == std::string::npos) return nullptr;
  const std::string sub = key.substr(0, underscore);
  const auto& subs = profilerReportSubRules();
  if (std::find(subs.begin(), subs.end(), sub) == subs.end()) return nullptr;
  const ParamDecl* p = findParam(builtinDecl(sub), key.substr(underscore + 1));
  return p != nullptr && overridable(*p) ? p : nullptr;
}

}  // namespace strata::rules
