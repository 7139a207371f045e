// What each rule checks and what to do about it, for the report.
#pragma once

#include <string>

namespace strata::rules::report {

struct RuleText {
  std::string description;
  std::string recommendation;
};
const RuleText& ruleText(const std::string& rule);

}  // namespace strata::rules::report
