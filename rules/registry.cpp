#include "rules/registry.h"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <stdexcept>

namespace strata::rules {
namespace {

std::mutex& registryMutex() {
  static std::mutex mu;
  return mu;
}

std::map<std::string, RuleFactory>& registry() {
  static std::map<std::string, RuleFactory> factories;
  return factories;
}

}  // namespace

void registerRule(const std::string& name, RuleFactory factory) {
  if (name.empty() || !factory) throw std::invalid_argument("registerRule: empty name or factory");
  std::lock_guard<std::mutex> lock(registryMutex());
  if (!registry().emplace(name, std::move(factory)).second)
    throw std::invalid_argument("registerRule: a rule named \"" + name + "\" is already registered");
}

bool isRegisteredRule(const std::string& name) {
  std::lock_guard<std::mutex> lock(registryMutex());
  return registry().count(name) > 0;
}

std::unique_ptr<Rule> makeRegisteredRule(const std::string& name, const nlohmann::json& params) {
  RuleFactory factory;
  {
    std::lock_guard<std::mutex> lock(registryMutex());
    auto it = registry().find(name);
    if (it == registry().end()) return nullptr;
    factory = it->second;
  }
  std::unique_ptr<Rule> rule = factory(params.is_null() ? nlohmann::json::object() : params);
  if (!rule) throw std::runtime_error("the factory of rule \"" + name + "\" returned no rule");
  return rule;
}

std::unique_ptr<Rule> loadPluginRule(const std::string& library, const std::string& name,
                                     const nlohmann::json& params) {
  using AbiFn = int (*)();
  using CreateFn = Rule* (*)(const char*, const char*, char*, size_t);
  static std::mutex mu;
  static std::map<std::string, void*> handles;
  void* handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = handles.find(library);
    if (it != handles.end()) {
      handle = it->second;
    } else {
      handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        const char* err = dlerror();
        throw std::runtime_error("cannot load rule library \"" + library + "\": " + (err ? err : "unknown error"));
      }
      handles.emplace(library, handle);
    }
  }
  auto abi = reinterpret_cast<AbiFn>(dlsym(handle, "strata_rules_abi_version"));
  auto create = reinterpret_cast<CreateFn>(dlsym(handle, "strata_create_rule"));
  if (abi == nullptr || create == nullptr)
    throw std::runtime_error("rule library \"" + library +
                             "\" does not export strata_rules_abi_version and strata_create_rule "
                             "(define them with STRATA_RULE_PLUGIN)");
  if (abi() != STRATA_RULES_ABI_VERSION)
    throw std::runtime_error("rule library \"" + library + "\" was built for rules ABI " + std::to_string(abi()) +
                             ", this build uses " + std::to_string(STRATA_RULES_ABI_VERSION));
  char error[1024] = {0};
  const std::string paramsJson = (params.is_null() ? nlohmann::json::object() : params).dump();
  Rule* rule = create(name.c_str(), paramsJson.c_str(), error, sizeof error);
  if (rule == nullptr)
    throw std::runtime_error("rule library \"" + library + "\" could not create rule \"" + name +
                             "\": " + (error[0] ? error : "no reason given"));
  return std::unique_ptr<Rule>(rule);
}

}  // namespace strata::rules
