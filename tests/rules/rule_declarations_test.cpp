// The built-in rules' parameter declarations (rules/declarations.h) against the rules'
// constructors: each rule reads exactly the parameters it declares, with the declared
// defaults, and ProfilerReport's "<SubRule>_<param>" overrides reach the sub-rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "rules/builtin.h"
#include "rules/declarations.h"
#include "rules/params.h"

namespace strata::rules {
namespace {

// Every declared parameter given with its default; a rule that needs one of several
// selections gets a regex for the first.
nlohmann::json declaredDefaults(const RuleDecl& decl) {
  nlohmann::json params = nlohmann::json::object();
  for (const ParamDecl& p : decl.params) params[p.name] = p.def;
  if (!decl.anyOf.empty()) params[decl.anyOf.front()] = ".*";
  return params;
}

TEST(RuleDeclarationsTest, EveryBuiltinRuleIsDeclaredAndEveryImplementedDeclarationIsBuiltin) {
  for (const std::string& name : builtinRuleNames()) {
    const RuleDecl* decl = findRuleDecl(name);
    ASSERT_NE(decl, nullptr) << name;
    EXPECT_TRUE(decl->implemented) << name;
    EXPECT_EQ(decl->profiler, isBuiltinMetricRule(name)) << name;
  }
  for (const RuleDecl& decl : builtinRuleDecls()) {
    EXPECT_EQ(decl.implemented, isBuiltinRule(decl.name)) << decl.name;
    if (!decl.implemented) {
      EXPECT_THROW(makeBuiltinRule(decl.name, declaredDefaults(decl), {}), std::invalid_argument)
          << decl.name;
    }
  }
}

// Given every declared key, checkAllUsed() proves each was read; reading an undeclared key
// throws std::logic_error. Together: the constructor reads exactly the declaration.
TEST(RuleDeclarationsTest, EachConstructorReadsExactlyItsDeclaredParameters) {
  for (const std::string& name : builtinRuleNames()) {
    if (name == "ProfilerReport") continue;  // a group, checked below
    const RuleDecl& decl = builtinDecl(name);
    for (const bool compat : {false, true}) {
      BuiltinContext ctx;
      ctx.compat = compat;
      EXPECT_NO_THROW(makeBuiltinRule(name, declaredDefaults(decl), ctx)) << name;
    }
    if (decl.anyOf.empty()) {
      // The declared defaults are the ones the rule uses: absent and given-as-default agree.
      const auto fromDefaults = makeBuiltinRule(name, nlohmann::json::object(), {})->report();
      const auto fromGiven = makeBuiltinRule(name, declaredDefaults(decl), {})->report();
      ASSERT_TRUE(fromDefaults && fromGiven) << name;
      EXPECT_EQ(fromDefaults->ruleParameters, fromGiven->ruleParameters) << name;
    }
  }
}

TEST(RuleDeclarationsTest, ParamsRejectUndeclaredReadsAndUnreadDeclaredKeys) {
  const RuleDecl decl{"Toy", false, true, {{"threshold", ParamKind::kNumber, 7}, kCompatParam}, {}, {}};
  Params reads(decl, nlohmann::json::object());
  EXPECT_EQ(reads.number("threshold"), 7);
  EXPECT_FALSE(reads.boolean("compat"));
  EXPECT_THROW(reads.number("treshold"), std::logic_error);
  EXPECT_THROW(reads.optionalString("mode"), std::logic_error);

  Params unread(decl, {{"threshold", 3}, {"compat", true}});
  EXPECT_EQ(unread.number("threshold"), 3);
  EXPECT_THROW(unread.checkAllUsed(), std::invalid_argument);  // compat given, never read
}

bool fitsKind(ParamKind kind, const nlohmann::json& v) {
  const bool integral = v.is_number_integer() || v.is_number_unsigned();
  switch (kind) {
    case ParamKind::kNumber: return v.is_number();
    case ParamKind::kPositive: return v.is_number() && v.get<double>() > 0;
    case ParamKind::kNonNegative: return v.is_number() && v.get<double>() >= 0;
    case ParamKind::kPercent: return v.is_number() && v.get<double>() >= 0 && v.get<double>() <= 100;
    case ParamKind::kFraction: return v.is_number() && v.get<double>() >= 0 && v.get<double>() <= 1;
    case ParamKind::kCount: return integral && v.get<int64_t>() >= 0;
    case ParamKind::kPositiveInt: return integral && v.get<int64_t>() >= 1;
    case ParamKind::kBool: return v.is_boolean();
    case ParamKind::kString:
    case ParamKind::kRegex: return v.is_string() && !v.get<std::string>().empty();
    case ParamKind::kMode: return v.is_string();
  }
  return false;
}

TEST(RuleDeclarationsTest, DefaultsFitTheirKindsAndNamesAreUnique) {
  for (const RuleDecl& decl : builtinRuleDecls()) {
    std::vector<std::string> names;
    for (const ParamDecl& p : decl.params) {
      names.push_back(p.name);
      if (!p.def.is_null()) {
        EXPECT_TRUE(fitsKind(p.kind, p.def)) << decl.name << "." << p.name << " = " << p.def;
      }
    }
    std::sort(names.begin(), names.end());
    EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end()) << decl.name;
    for (const std::string& key : decl.required) EXPECT_NE(findParam(decl, key), nullptr) << decl.name << "." << key;
    for (const std::string& key : decl.anyOf) EXPECT_NE(findParam(decl, key), nullptr) << decl.name << "." << key;
  }
}

TEST(RuleDeclarationsTest, ProfilerReportTakesEverySubRuleOverrideTheJobConfigOffers) {
  const RuleDecl& report = builtinDecl("ProfilerReport");
  nlohmann::json params = nlohmann::json::object();
  for (const std::string& key : jobConfigKeys(report)) {
    const ParamDecl* p = findJobConfigParam(report, key);
    ASSERT_NE(p, nullptr) << key;
    params[key] = p->def;
  }
  params["CPUBottleneck_threshold"] = 40;
  int64_t scan = 0;
  const auto rules = makeProfilerReportRules(params, {}, {}, &scan);
  ASSERT_EQ(rules.size(), profilerReportSubRules().size());
  EXPECT_EQ(scan, kScanIntervalParam.def.get<int64_t>());
  EXPECT_EQ(rules[0]->name(), "CPUBottleneck");
  EXPECT_NE(rules[0]->report()->ruleParameters.find("threshold:40"), std::string::npos)
      << rules[0]->report()->ruleParameters;
  // The shared scan and the rules-file-only compat are not sub-rule overrides in a job config.
  EXPECT_EQ(findJobConfigParam(report, "CPUBottleneck_scan_interval_us"), nullptr);
  EXPECT_EQ(findJobConfigParam(report, "CPUBottleneck_compat"), nullptr);
  EXPECT_EQ(findJobConfigParam(builtinDecl("Overfit"), "compat"), nullptr);
  EXPECT_NE(findJobConfigParam(builtinDecl("LossNotDecreasing"), "smoothing_window"), nullptr);
}

}  // namespace
}  // namespace strata::rules
