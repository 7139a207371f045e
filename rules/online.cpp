#include "rules/online.h"

#include <string>

#include "core/errors.h"
#include "core/logging.h"
#include "rules/run.h"

namespace strata::rules {

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
