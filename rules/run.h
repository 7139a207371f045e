// An engine over a run directory: the rules to run (a rules file, the job config, or the
// defaults) and the file sources, for `strata rules`, `strata report` and the runtime's online
// thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rules/engine.h"
#include "rules/sources/file_sources.h"

namespace strata::rules {

// What runs when nothing is configured: ProfilerReport when there is profiler data, and
// LossNotDecreasing, ExplodingTensor and VanishingGradient when there are tensors.
std::vector<RuleSpec> defaultRuleSpecs(bool haveTensors, bool haveMetrics);

// The rule specs for a run: `rulesFile` when given (a rules file, or a job config whose "rules"
// section is used), else <runDir>/rules.json, else <runDir>/job.json's or <runDir>/config.json's
// "rules", else the defaults. *compat is set from a rules file's "compat". *source names where
// the rules came from.
std::vector<RuleSpec> loadRuleSpecs(const std::string& runDir, const std::string& rulesFile, bool* compat,
                                    std::string* source);

// An engine with the run's file sources. With options.follow the sources attach when their
// folders appear (a job that is starting). Throws strata::ConfigError on bad rules.
std::unique_ptr<Engine> makeRunEngine(const std::string& runDir, const std::vector<RuleSpec>& specs,
                                      EngineOptions engineOptions, FileSourceOptions sourceOptions);

// `strata rules`' exit codes: a rule in status Error (or the command failed), and a
// configured rule that had no data (NoData; ProfilerReport counts as one rule, with no data
// only when none of its sub-rules had any). Error wins over NoData; otherwise 0.
inline constexpr int kExitRuleError = 1;
inline constexpr int kExitRuleNoData = 3;
// Pure: the exit code for these results.
int runExitCode(const std::vector<RuleSummary>& rules);

// Prints the rule table to stdout (and writes the HTML report when asked). Returns the exit
// code of `strata rules` (runExitCode).
int printRunSummary(const Engine& engine, const std::string& runDir, bool writeReportToo);

}  // namespace strata::rules
