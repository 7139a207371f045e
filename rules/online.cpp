#include "rules/online.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/logging.h"
#include "rules/run.h"

namespace strata::rules {

namespace {

// <runDir>/rules.json: the rules this job runs, so that `strata rules RUN_DIR` and
// `strata report RUN_DIR --rerun` later evaluate the same ones. A file already there (the
// user's) is left alone.
void recordRuleSpecs(const std::vector<RuleSpec>& specs, const OnlineRulesOptions& options) {
  namespace fs = std::filesystem;
  const fs::path path = fs::path(options.runDir) / "rules.json";
  std::error_code ec;
  if (fs::exists(path, ec)) return;
  nlohmann::json rules = nlohmann::json::array();
  for (const RuleSpec& s : specs) {
    nlohmann::json r = {{"name", s.name}, {"parameters", s.parameters}, {"actions", s.actions}};
    if (!s.library.empty()) r["library"] = s.library;
    rules.push_back(std::move(r));
  }
  std::string error;
  if (!tryWriteFileAtomically(path.string(),
                              nlohmann::json{{"compat", options.compat}, {"rules", rules}}.dump(2) + "\n",
                              Durability::kAtomicOnly, &error))
    STRATA_LOG(kWarn, kRules, "online rules: cannot write ", path.string(), ": ", error);
}

}  // namespace

std::unique_ptr<RuleRunner> startOnlineRules(const std::vector<RuleSpec>& specs, const OnlineRulesOptions& options) {
  if (specs.empty()) return nullptr;
  EngineOptions eo;
  eo.runDir = options.runDir;
  eo.compat = options.compat;
  // In-process: StopTraining sets StopSignal::global(), which should_stop() reads directly.
  eo.writeStopFile = false;
  FileSourceOptions so;
  so.follow = true;
  so.compat = options.compat;
  auto engine = makeRunEngine(options.runDir, specs, eo, so);
  recordRuleSpecs(specs, options);
  STRATA_LOG(kInfo, kRules, "online rules: ", specs.size(), " rule(s) on ", options.runDir, ", polled every ",
             options.interval.count(), " ms");
  return std::make_unique<RuleRunner>(std::move(engine), options.interval);
}

void stopOnlineRules(std::unique_ptr<RuleRunner>& runner) {
  if (!runner) return;
  try {
    runner->stop();
    for (const RuleSummary& s : runner->summary()) {
      if (s.status == RuleStatus::kIssuesFound || s.status == RuleStatus::kError)
        STRATA_LOG(kWarn, kRules, "rule ", s.name, ": ", statusName(s.status), " (", s.findings, " finding(s)): ",
                   s.reason);
    }
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kRules, "online rules: stopping failed: ", e.what());
  }
  runner.reset();
}

}  // namespace strata::rules
