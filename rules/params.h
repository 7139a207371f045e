// Rule parameters: typed reads with defaults from the JSON object a config gives, the
// RuleParameters string of the reference report, and a check that every given key was used.
// Values may be numbers/booleans or SageMaker-style strings ("90", "True"). A built-in rule's
// Params reads through its declaration (rules/declarations.h): defaults come from there and a
// read of an undeclared key is a programming error.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace strata::rules {

struct RuleDecl;
struct ParamDecl;

class Params {
 public:
  Params(std::string rule, nlohmann::json given);
  // Reads checked against `decl` (which must outlive this object): every key read must be
  // declared there (std::logic_error otherwise), and the reads below without a default take the
  // declared one.
  Params(const RuleDecl& decl, nlohmann::json given);

  // Each read records the effective value (given or default) for repr(). Throws
  // std::invalid_argument naming the rule, key and value when the value has the wrong type.
  double number(const std::string& key, const nlohmann::json& def);
  int64_t integer(const std::string& key, int64_t def);
  bool boolean(const std::string& key, bool def);
  std::string string(const std::string& key, const std::string& def);
  std::optional<double> optionalNumber(const std::string& key);
  std::optional<std::string> optionalString(const std::string& key);
  // A list given as a JSON array or a comma-separated string ("a, b"); empty when absent.
  std::vector<std::string> list(const std::string& key);
  // The same reads with the declared default (Params(decl, ...) only).
  double number(const std::string& key);
  int64_t integer(const std::string& key);
  bool boolean(const std::string& key);
  std::string string(const std::string& key);
  bool has(const std::string& key) const { return given_.contains(key); }

  // Python's str() of the effective value: 50, 0.2, None, True.
  std::string repr(const std::string& key) const;
  // "k1:v1\nk2:v2" in the order given (the reference's RuleParameters format).
  std::string joined(const std::vector<std::string>& keys) const;
  // Every read key with its effective value.
  const nlohmann::json& effective() const { return effective_; }

  // Throws std::invalid_argument for given keys no read consumed (a typo in the config).
  void checkAllUsed() const;
  const std::string& rule() const { return rule_; }

 private:
  const nlohmann::json* find(const std::string& key);
  // The declaration of `key`; throws std::logic_error when it has none.
  const ParamDecl& declared(const std::string& key) const;
  [[noreturn]] void bad(const std::string& key, const nlohmann::json& v, const char* want) const;

  std::string rule_;
  const RuleDecl* decl_ = nullptr;
  nlohmann::json given_;
  nlohmann::json effective_ = nlohmann::json::object();
  std::set<std::string> used_;
};

// Python str() of a JSON scalar (ints as ints, floats as repr(float), null as None).
std::string pyStr(const nlohmann::json& v);

}  // namespace strata::rules
