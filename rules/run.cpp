#include "rules/run.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "core/errors.h"
#include "rules/builtin.h"
#include "rules/report/html_report.h"

namespace strata::rules {
namespace {

namespace fs = std::filesystem;

std::string readText(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Attaches the real source once its files exist.
class LazyTensorSource final : public TensorSource, public Trial {
 public:
  explicit LazyTensorSource(std::string runDir) : runDir_(std::move(runDir)) {}
  void refresh() override {
    if (!inner_) inner_ = makeTrialSource(runDir_);
    if (inner_) inner_->refresh();
  }
  const Trial& trial() const override { return inner_ ? inner_->trial() : *this; }
  std::vector<std::string> collections() const override { return {}; }
  std::vector<std::string> tensorNames(const std::string&) const override { return {}; }
  std::vector<StepInfo> steps() const override { return {}; }
  bool hasTensor(const std::string&, int64_t) const override { return false; }
  std::optional<TensorValue> value(const std::string&, int64_t) const override { return std::nullopt; }
  bool finished() const override { return false; }

 private:
  std::string runDir_;
  std::unique_ptr<TensorSource> inner_;
};

class LazyMetricSource final : public MetricSource {
 public:
  LazyMetricSource(std::string runDir, FileSourceOptions options) : runDir_(std::move(runDir)), options_(options) {}
  bool poll(MetricBatch& out, size_t maxItems) override {
    if (!inner_) inner_ = makeProfilerSource(runDir_, options_);
    return inner_ && inner_->poll(out, maxItems);
  }
  int64_t watermarkUs() const override { return inner_ ? inner_->watermarkUs() : INT64_MIN; }
  bool finished() const override { return inner_ && inner_->finished(); }
  std::optional<int64_t> firstFileStampUs() const override { return inner_ ? inner_->firstFileStampUs() : std::nullopt; }
  std::optional<int64_t> latestFileStampUs() const override { return inner_ ? inner_->latestFileStampUs() : std::nullopt; }

 private:
  std::string runDir_;
  FileSourceOptions options_;
  std::unique_ptr<MetricSource> inner_;
};

std::vector<RuleSpec> specsFromJson(const nlohmann::json& rules, const std::string& source) {
  return parseRulesFile(nlohmann::json{{"rules", rules}}.dump(), source).rules;
}

}  // namespace

std::vector<RuleSpec> defaultRuleSpecs(bool haveTensors, bool haveMetrics) {
  std::vector<RuleSpec> specs;
  if (haveMetrics) specs.emplace_back("ProfilerReport");
  if (haveTensors) {
    specs.emplace_back("LossNotDecreasing");
    specs.emplace_back("ExplodingTensor");
    specs.emplace_back("VanishingGradient");
  }
  return specs;
}

std::vector<RuleSpec> loadRuleSpecs(const std::string& runDir, const std::string& rulesFile, bool* compat,
                                    std::string* source) {
  auto fromFile = [&](const fs::path& p) -> std::optional<std::vector<RuleSpec>> {
    const std::string text = readText(p);
    const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded()) STRATA_THROW(ConfigError, p.string(), ": invalid JSON");
    // A job config: take its "rules" section (other sections are not ours to check).
    if (doc.is_object() && doc.contains("rules") && !doc.contains("compat") && doc.size() > 1) {
      if (!doc["rules"].is_array() || doc["rules"].empty()) return std::nullopt;
      *source = p.string() + " (job config)";
      return specsFromJson(doc["rules"], p.string());
    }
    RulesFile f = parseRulesFile(text, p.string());
    if (compat != nullptr && f.compat) *compat = true;
    *source = p.string();
    return f.rules;
  };
  if (!rulesFile.empty()) {
    if (!fs::exists(rulesFile)) STRATA_THROW(ConfigError, rulesFile, ": no such file");
    if (auto s = fromFile(rulesFile)) return *s;
  }
  for (const char* name : {"rules.json", "job.json", "config.json"}) {
    const fs::path p = fs::path(runDir) / name;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) continue;
    if (auto s = fromFile(p)) return *s;
  }
  *source = "defaults";
  const bool tensors = fs::exists(fs::path(runDir) / "index") || fs::exists(fs::path(runDir) / "collections");
  const bool metrics = makeProfilerSource(runDir, {}) != nullptr;
  return defaultRuleSpecs(tensors, metrics);
}

std::unique_ptr<Engine> makeRunEngine(const std::string& runDir, const std::vector<RuleSpec>& specs,
                                      EngineOptions engineOptions, FileSourceOptions sourceOptions) {
  sourceOptions.compat = sourceOptions.compat || engineOptions.compat;
  auto engine = std::make_unique<Engine>(std::move(engineOptions));
  engine->addRules(specs);
  if (engine->needsTensors()) {
    if (sourceOptions.follow) {
      engine->setTensorSource(std::make_unique<LazyTensorSource>(runDir));
    } else if (auto t = makeTrialSource(runDir)) {
      engine->setTensorSource(std::move(t));
    }
  }
  if (engine->needsMetrics()) {
    if (sourceOptions.follow) {
      engine->setMetricSource(std::make_unique<LazyMetricSource>(runDir, sourceOptions));
    } else if (auto m = makeProfilerSource(runDir, sourceOptions)) {
      engine->setMetricSource(std::move(m));
    }
  }
  return engine;
}

int runExitCode(const std::vector<RuleSummary>& rules) {
  bool error = false;
  std::map<std::string, bool> groupHasData;  // ProfilerReport: any sub-rule with data
  bool noData = false;
  for (const RuleSummary& s : rules) {
    error |= s.status == RuleStatus::kError;
    if (s.group.empty()) {
      noData |= s.status == RuleStatus::kNoData;
    } else {
      groupHasData[s.group] |= s.status != RuleStatus::kNoData;
    }
  }
  for (const auto& g : groupHasData) noData |= !g.second;
  return error ? kExitRuleError : noData ? kExitRuleNoData : 0;
}

int printRunSummary(const Engine& engine, const std::string& runDir, bool writeReportToo) {
  int errors = 0, issues = 0, noData = 0;
  std::printf("\n%-26s %-14s %10s %10s  %s\n", "rule", "status", "triggered", "datapoints", "analysis");
  const std::vector<RuleSummary> rules = engine.summary();
  for (const auto& s : rules) {
    errors += s.status == RuleStatus::kError;
    issues += s.status == RuleStatus::kIssuesFound;
    noData += s.status == RuleStatus::kNoData;
    std::string reason = s.reason;
    if (reason.size() > 110) reason = reason.substr(0, 107) + "...";
    std::printf("%-26s %-14s %10lld %10lld  %s\n", s.name.c_str(), statusName(s.status),
                static_cast<long long>(s.ruleTriggered), static_cast<long long>(s.datapoints), reason.c_str());
  }
  std::printf("\n%d rule(s) found issues, %d had no data, %d failed. Results: %s/rule-output/\n", issues, noData,
              errors, runDir.c_str());
  if (writeReportToo) std::printf("Report: %s\n", report::writeReport(runDir).c_str());
  if (StopSignal::stopFileExists(runDir))
    std::printf("StopTraining was requested: %s\n", StopSignal::stopFilePath(runDir).c_str());
  return runExitCode(rules);
}

}  // namespace strata::rules
