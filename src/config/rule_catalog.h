// Internal: the built-in rules a job config may name, with their parameter names and the
// kind of value each takes (specs/smdebug.md §3.1 profiler rules, §3.2 debugger rules).
// Defaults are not here: a parameter left out takes the rule's own default, owned by rules/.
#pragma once

#include <string>
#include <vector>

namespace strata::config::detail {

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

struct ParamSpec {
  std::string name;
  ParamKind kind;
};

struct RuleSpec {
  std::string name;
  bool profiler;  // reads profiler metrics rather than tensors
  std::vector<ParamSpec> params;
  std::vector<std::string> required;  // each must be given
  std::vector<std::string> anyOf;     // at least one must be given
};

const std::vector<RuleSpec>& ruleSpecs();
const RuleSpec* findRuleSpec(const std::string& name);
// Rules SageMaker defines for XGBoost only; named in a dedicated message.
bool isXgboostRule(const std::string& name);
// The sub-rules ProfilerReport runs; "<SubRule>_<param>" overrides one of their parameters.
const std::vector<std::string>& profilerReportSubRules();

// Every parameter key valid for `rule`, including ProfilerReport's overrides, and the spec
// of one key (nullptr when unknown).
std::vector<std::string> parameterKeys(const RuleSpec& rule);
const ParamSpec* findParamSpec(const RuleSpec& rule, const std::string& key);

}  // namespace strata::config::detail
