// The online rule engine of a training job: rank 0 runs the job config's rules on a background
// thread (RuleRunner) over the run directory's files as they are written. Started by the
// runtime at init, stopped at finalize after every writer has closed its files and the end
// markers exist, so the last poll sees the whole run and rule-output/ is final.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "rules/engine.h"
#include "rules/runner.h"

namespace strata::rules {

struct OnlineRulesOptions {
  std::string runDir;
  bool compat = false;
  // How often the thread polls the files (STRATA_RULES_INTERVAL_MS overrides it).
  std::chrono::milliseconds interval{5000};
};

// Starts the thread for `specs` (nullptr when there are none) and records them in
// <runDir>/rules.json unless that file exists, so offline `strata rules RUN_DIR` runs the same. Throws strata::ConfigError on
// rules that cannot be built (a library that does not load, for example).
std::unique_ptr<RuleRunner> startOnlineRules(const std::vector<RuleSpec>& specs, const OnlineRulesOptions& options);

// Stops the thread (final poll, finish, rule-output/ written) and logs one line per rule that
// found issues. Never throws.
void stopOnlineRules(std::unique_ptr<RuleRunner>& runner);

}  // namespace strata::rules
