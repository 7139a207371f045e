// Rules files ({"compat": false, "rules": [...]}): parsed and checked (engine.h).
#include "core/errors.h"
#include "rules/builtin.h"
#include "rules/engine.h"
#include "rules/registry.h"

namespace strata::rules {

RulesFile parseRulesFile(const std::string& text, const std::string& source) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded()) STRATA_THROW(ConfigError, source, ": invalid JSON");
  const nlohmann::json* list = &doc;
  RulesFile out;
  if (doc.is_object()) {
    for (const auto& item : doc.items()) {
      if (item.key() == "compat") {
        if (!item.value().is_boolean()) STRATA_THROW(ConfigError, source, ": /compat must be true or false");
        out.compat = item.value().get<bool>();
      } else if (item.key() != "rules") {
        STRATA_THROW(ConfigError, source, ": unknown key \"", item.key(), "\" (compat, rules)");
      }
    }
    if (!doc.contains("rules")) STRATA_THROW(ConfigError, source, ": missing \"rules\"");
    list = &doc.at("rules");
  }
  if (!list->is_array()) STRATA_THROW(ConfigError, source, ": /rules must be a list");
  for (size_t i = 0; i < list->size(); ++i) {
    const nlohmann::json& r = (*list)[i];
    const std::string path = c10::str(source, ": /rules/", i);
    if (!r.is_object()) STRATA_THROW(ConfigError, path, " must be an object");
    RuleSpec spec;
    for (const auto& item : r.items()) {
      const std::string& k = item.key();
      if (k == "name" && item.value().is_string()) {
        spec.name = item.value().get<std::string>();
      } else if (k == "parameters" && item.value().is_object()) {
        spec.parameters = item.value();
      } else if (k == "actions" && item.value().is_array()) {
        spec.actions = item.value();
      } else if (k == "library" && item.value().is_string()) {
        spec.library = item.value().get<std::string>();
      } else {
        STRATA_THROW(ConfigError, path, "/", k, ": unexpected ",
                     (k == "name" || k == "parameters" || k == "actions" || k == "library") ? "type" : "key",
                     " (name: string, parameters: object, actions: list, library: string)");
      }
    }
    if (spec.name.empty()) STRATA_THROW(ConfigError, path, ": a rule needs a \"name\"");
    if (spec.library.empty() && !isBuiltinRule(spec.name) && !isRegisteredRule(spec.name))
      STRATA_THROW(ConfigError, path, "/name: unknown rule \"", spec.name,
                   "\" (not built in, not registered; give \"library\" for a rule in a shared library)");
    out.rules.push_back(std::move(spec));
  }
  return out;
}

}  // namespace strata::rules
