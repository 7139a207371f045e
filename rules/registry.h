// Custom rules: the in-process registry (strata::rules::registerRule) and rules loaded from
// shared libraries (the STRATA_RULE_PLUGIN entry points, include/strata/rules.h).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "strata/rules.h"

namespace strata::rules {

// The registered factory's rule, or nullptr when `name` is not registered.
std::unique_ptr<Rule> makeRegisteredRule(const std::string& name, const nlohmann::json& params);
bool isRegisteredRule(const std::string& name);

// dlopen()s `library` (once per path; never unloaded, the rules' code lives there), checks its
// ABI version and creates rule `name`. Throws std::runtime_error naming the library on failure.
std::unique_ptr<Rule> loadPluginRule(const std::string& library, const std::string& name,
                                     const nlohmann::json& params);

}  // namespace strata::rules
