// The parameters of every built-in rule, declared once: name, kind, default, and which must be
// given (specs/smdebug.md §3.1 profiler rules, §3.2 debugger rules). Each rule's constructor
// reads its parameters through this table (rules/params.h: Params(builtinDecl(name), ...)) and
// the job config validation (src/config/rules_section.cpp) checks a "rules" section against it.
// Pure data with no dependency beyond nlohmann-json: it is its own small library
// (strata_rule_decls) that both strata_core (the config) and strata_rules link; see
// docs/architecture.md "Rule parameters".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace strata::rules {

enum class ParamKind {
  kNumber,       // any finite number
  kPositive,     // > 0
  kNonNegative,  // >= 0
  kPercent,      // [0, 100]
  kFraction,     // [0, 1]
  kCount,        // integer >= 0
  kPositiveInt,  // integer >= 1
  kBool,
  kString,  // non-empty
  kRegex,   // non-empty ECMAScript regular expression
  kMode,    // "GLOBAL" | "TRAIN" | "EVAL" | "PREDICT"
};

struct ParamDecl {
  std::string name;
  ParamKind kind;
  nlohmann::json def;  // the default; null when the rule treats "absent" on its own
  // False for Strata's rules-file-only parameters (compat), which a job config does not take.
  bool inJobConfig = true;
};

struct RuleDecl {
  std::string name;
  bool profiler;     // reads profiler metrics rather than tensors
  bool implemented;  // Strata has a constructor for it (some SageMaker rules are config-only)
  std::vector<ParamDecl> params;
  std::vector<std::string> required;  // each must be given
  std::vector<std::string> anyOf;     // at least one must be given
};

// Parameters several rules share (same name, kind and default everywhere).
extern const ParamDecl kScanIntervalParam;  // every profiler rule's base class
extern const ParamDecl kCompatParam;        // docs/rules.md "compat mode"; rules files only

// Every built-in rule SageMaker defines for PyTorch (tensor rules first), and one of them.
const std::vector<RuleDecl>& builtinRuleDecls();
const RuleDecl* findRuleDecl(const std::string& name);
// The declaration of a rule Strata constructs; throws std::logic_error when there is none (a
// rule without a declaration is a programming error, caught by rule_declarations_test).
const RuleDecl& builtinDecl(const std::string& name);
const ParamDecl* findParam(const RuleDecl& rule, const std::string& key);

// Rules SageMaker defines for XGBoost only; named in a dedicated message.
bool isXgboostRule(const std::string& name);
// The sub-rules ProfilerReport runs, in the reference's order; "<SubRule>_<param>" overrides
// one of their parameters.
const std::vector<std::string>& profilerReportSubRules();

// Every parameter key a job config may give `rule`, including ProfilerReport's overrides, and
// the declaration of one such key (nullptr when unknown).
std::vector<std::string> jobConfigKeys(const RuleDecl& rule);
const ParamDecl* findJobConfigParam(const RuleDecl& rule, const std::string& key);

// One entry of the table. A tensor rule also takes compat; a metric rule also takes its base
// class's scan_interval_us and compat; a config-only rule is known to SageMaker but not run by
// Strata (the config accepts it, the engine says it is not implemented).
RuleDecl tensorRuleDecl(std::string name, std::vector<ParamDecl> params,
                        std::vector<std::string> anyOf = {});
RuleDecl metricRuleDecl(std::string name, std::vector<ParamDecl> params);
RuleDecl configOnlyRuleDecl(std::string name, std::vector<ParamDecl> params,
                            std::vector<std::string> required = {});

// Parts of the table, one per rule family (rules/training, rules/profiler).
std::vector<RuleDecl> trainingRuleDecls();
std::vector<RuleDecl> profilerRuleDecls();

}  // namespace strata::rules
