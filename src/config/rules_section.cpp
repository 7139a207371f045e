// The "rules" section: a list of built-in rules with actions and parameters. Parameter
// values are checked by kind and normalised, because SageMaker users write them as
// strings ("rule_parameters": {"threshold": "20"}) while JSON users write numbers.
#include <algorithm>
#include <cctype>
#include <limits>
#include <map>

#include "config/sections.h"
#include "rules/declarations.h"

namespace strata::config {

const std::vector<std::string>& knownRuleNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const rules::RuleDecl& decl : rules::builtinRuleDecls()) names.push_back(decl.name);
    return names;
  }();
  return kNames;
}

bool isProfilerRule(const std::string& ruleName) {
  const rules::RuleDecl* decl = rules::findRuleDecl(ruleName);
  return decl != nullptr && decl->profiler;
}

bool RuleConfig::stopsTraining() const {
  return std::find(actions.begin(), actions.end(), "StopTraining") != actions.end();
}

}  // namespace strata::config

namespace strata::config::detail {
namespace {

// The rule parameters are declared beside the rules (rules/declarations.h).
using rules::findJobConfigParam;
using rules::findRuleDecl;
using rules::isXgboostRule;
using rules::jobConfigKeys;
using rules::ParamKind;
using ParamSpec = rules::ParamDecl;
using RuleSpec = rules::RuleDecl;

constexpr double kInf = std::numeric_limits<double>::infinity();

// "90" -> 90 and "0.5" -> 0.5; anything else stays as given (and then fails the check).
Json numberFromString(const Json& value) {
  if (!value.is_string()) return value;
  const Json parsed = Json::parse(value.get<std::string>(), nullptr, /*allow_exceptions=*/false);
  return parsed.is_number() ? parsed : value;
}

// "True"/"false" (Python's str(bool) and JSON's spelling) -> bool.
Json boolFromString(const Json& value) {
  if (!value.is_string()) return value;
  const std::string text = lowercase(value.get<std::string>());
  if (text == "true") return true;
  if (text == "false") return false;
  return value;
}

// Checks one parameter value against its kind and returns it normalised.
Json checkParam(const Validator& v, const ParamSpec& spec, const Json& value,
                const std::string& path) {
  switch (spec.kind) {
    case ParamKind::kNumber:
      return v.expectNumber(numberFromString(value), path, -kInf, kInf);
    case ParamKind::kPositive:
      return v.expectNumber(numberFromString(value), path, 0.0, kInf, true);
    case ParamKind::kNonNegative:
      return v.expectNumber(numberFromString(value), path, 0.0, kInf);
    case ParamKind::kPercent:
      return v.expectNumber(numberFromString(value), path, 0.0, 100.0);
    case ParamKind::kFraction:
      return v.expectNumber(numberFromString(value), path, 0.0, 1.0);
    case ParamKind::kCount:
      return v.expectInt(numberFromString(value), path, 0, kNoMax);
    case ParamKind::kPositiveInt:
      return v.expectInt(numberFromString(value), path, 1, kNoMax);
    case ParamKind::kBool:
      return v.expectBool(boolFromString(value), path);
    case ParamKind::kString:
      return v.expectString(value, path);
    case ParamKind::kRegex:
      return v.expectRegex(value, path);
    case ParamKind::kMode:
      return v.expectEnum(value, path, {"GLOBAL", "TRAIN", "EVAL", "PREDICT"});
  }
  return value;
}

const RuleSpec& checkRuleName(const Validator& v, const Json& value, const std::string& path) {
  const std::string name = v.expectString(value, path);
  if (const RuleSpec* spec = findRuleDecl(name)) return *spec;
  if (isXgboostRule(name))
    v.fail(path, "\"" + name +
                     "\" is an XGBoost-only rule; Strata trains libtorch models, so it has nothing "
                     "to check");
  v.fail(path,
         "unknown rule \"" + name + "\"" + suggestionSuffix(name, knownRuleNames(), "known rules"));
}

std::vector<std::string> parseActions(const Validator& v, const Json& value,
                                      const std::string& path) {
  std::vector<std::string> actions;
  const Json& items = v.expectArray(value, path);
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string itemPath = childPath(path, i);
    const std::string action = v.expectString(items[i], itemPath);
    if (action == "Email" || action == "SMS") {
      v.fail(itemPath,
             "\"" + action +
                 "\" needs SageMaker's notification service; Strata supports "
                 "\"StopTraining\" (findings are always logged and written to rule-output/)");
    }
    if (action != "StopTraining")
      v.fail(itemPath, describe(items[i]) + " is not one of \"StopTraining\"" +
                           suggestionSuffix(action, {"StopTraining"}, "valid actions"));
    if (std::find(actions.begin(), actions.end(), action) != actions.end())
      v.fail(itemPath, "action \"" + action + "\" is listed twice");
    actions.push_back(action);
  }
  return actions;
}

std::map<std::string, Json> parseParameters(const Validator& v, const RuleSpec& rule,
                                            const Json& value, const std::string& path) {
  v.expectObject(value, path);
  std::map<std::string, Json> params;
  for (const auto& item : value.items()) {
    const ParamSpec* spec = findJobConfigParam(rule, item.key());
    if (spec == nullptr) v.failUnknownKey(path, item.key(), jobConfigKeys(rule));
    params[item.key()] = checkParam(v, *spec, item.value(), childPath(path, item.key()));
  }
  for (const std::string& name : rule.required) {
    if (!params.count(name))
      v.fail(path, "rule \"" + rule.name + "\" needs the parameter \"" + name + "\"");
  }
  if (!rule.anyOf.empty() &&
      std::none_of(rule.anyOf.begin(), rule.anyOf.end(),
                   [&](const std::string& n) { return params.count(n) > 0; })) {
    v.fail(path, "rule \"" + rule.name + "\" needs at least one of " + quoteList(rule.anyOf));
  }
  return params;
}

RuleConfig parseRule(const Validator& v, const Json& item, const std::string& path) {
  const ObjectReader r(v, item, path, {"name", "actions", "parameters"});
  if (!r.has("name")) v.fail(path, "a rule needs a \"name\"");
  const RuleSpec& spec = checkRuleName(v, r.at("name"), r.pathOf("name"));
  RuleConfig rule;
  rule.name = spec.name;
  if (r.has("actions")) rule.actions = parseActions(v, r.at("actions"), r.pathOf("actions"));
  // Parsed even when absent, so required parameters are reported.
  rule.parameters = parseParameters(
      v, spec, r.has("parameters") ? r.at("parameters") : Json::object(), r.pathOf("parameters"));
  return rule;
}

}  // namespace

std::vector<RuleConfig> parseRules(const Validator& v, const Json& section,
                                   const std::string& path) {
  std::vector<RuleConfig> rules;
  const Json& items = v.expectArray(section, path);
  std::map<std::string, std::string> seen;  // name -> path of its first definition
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string itemPath = childPath(path, i);
    RuleConfig rule = parseRule(v, items[i], itemPath);
    const auto [it, inserted] = seen.emplace(rule.name, itemPath);
    if (!inserted) {
      v.fail(childPath(itemPath, "name"), "rule \"" + rule.name + "\" is already configured at " +
                                              it->second + " (each rule writes one rule-output/" +
                                              rule.name + ".json)");
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

Json rulesToJson(const std::vector<RuleConfig>& rules) {
  Json out = Json::array();
  for (const RuleConfig& rule : rules) {
    Json params = Json::object();
    for (const auto& [key, value] : rule.parameters) params[key] = value;
    out.push_back({{"name", rule.name}, {"actions", rule.actions}, {"parameters", params}});
  }
  return out;
}

}  // namespace strata::config::detail
