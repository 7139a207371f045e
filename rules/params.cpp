#include "rules/params.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "rules/declarations.h"
#include "rules/format.h"
#include "rules/stats.h"

namespace strata::rules {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

}  // namespace

std::string pyStr(const nlohmann::json& v) {
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number_float()) return stats::pyFloat(v.get<double>());
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

Params::Params(std::string rule, nlohmann::json given)
    : rule_(std::move(rule)), given_(given.is_null() ? nlohmann::json::object() : std::move(given)) {
  if (!given_.is_object())
    throw std::invalid_argument(rule_ + ": parameters must be a JSON object, got " + given_.dump());
}

Params::Params(const RuleDecl& decl, nlohmann::json given) : Params(decl.name, std::move(given)) {
  decl_ = &decl;
}

const ParamDecl& Params::declared(const std::string& key) const {
  const ParamDecl* p = decl_ == nullptr ? nullptr : findParam(*decl_, key);
  if (p == nullptr)
    throw std::logic_error(rule_ + ": reads parameter \"" + key +
                           "\", which the rule's declaration (rules/declarations.h) lacks");
  return *p;
}

double Params::number(const std::string& key) { return number(key, declared(key).def); }

int64_t Params::integer(const std::string& key) {
  return integer(key, declared(key).def.get<int64_t>());
}

bool Params::boolean(const std::string& key) { return boolean(key, declared(key).def.get<bool>()); }

std::string Params::string(const std::string& key) {
  return string(key, declared(key).def.get<std::string>());
}

const nlohmann::json* Params::find(const std::string& key) {
  if (decl_ != nullptr) declared(key);
  used_.insert(key);
  auto it = given_.find(key);
  return it == given_.end() ? nullptr : &*it;
}

void Params::bad(const std::string& key, const nlohmann::json& v, const char* want) const {
  throw std::invalid_argument(rule_ + ": parameter \"" + key + "\" must be " + want + ", got " +
                              v.dump());
}

double Params::number(const std::string& key, const nlohmann::json& def) {
  const nlohmann::json* v = find(key);
  if (v == nullptr || v->is_null()) {
    effective_[key] = def;
    return def.is_null() ? std::nan("") : def.get<double>();
  }
  nlohmann::json parsed = *v;
  if (v->is_string()) {
    parsed = nlohmann::json::parse(trim(v->get<std::string>()), nullptr, false);
    if (parsed.is_discarded()) bad(key, *v, "a number");
  }
  if (!parsed.is_number()) bad(key, *v, "a number");
  const double x = parsed.get<double>();
  if (!std::isfinite(x)) bad(key, *v, "a finite number");
  effective_[key] = parsed;
  return x;
}

int64_t Params::integer(const std::string& key, int64_t def) {
  const double x = number(key, def);
  if (x != std::floor(x)) bad(key, given_.at(key), "an integer");
  effective_[key] = static_cast<int64_t>(x);
  return static_cast<int64_t>(x);
}

bool Params::boolean(const std::string& key, bool def) {
  const nlohmann::json* v = find(key);
  if (v == nullptr || v->is_null()) {
    effective_[key] = def;
    return def;
  }
  bool out;
  if (v->is_boolean()) {
    out = v->get<bool>();
  } else if (v->is_string() && lower(trim(v->get<std::string>())) == "true") {
    out = true;
  } else if (v->is_string() && lower(trim(v->get<std::string>())) == "false") {
    out = false;
  } else {
    bad(key, *v, "a boolean");
  }
  effective_[key] = out;
  return out;
}

std::string Params::string(const std::string& key, const std::string& def) {
  const nlohmann::json* v = find(key);
  if (v == nullptr || v->is_null()) {
    effective_[key] = def;
    return def;
  }
  if (!v->is_string()) bad(key, *v, "a string");
  effective_[key] = *v;
  return v->get<std::string>();
}

std::optional<double> Params::optionalNumber(const std::string& key) {
  const nlohmann::json* v = find(key);
  if (v == nullptr || v->is_null() || (v->is_string() && (trim(v->get<std::string>()).empty() ||
                                                          v->get<std::string>() == "None"))) {
    effective_[key] = nullptr;
    return std::nullopt;
  }
  return number(key, 0);
}

std::optional<std::string> Params::optionalString(const std::string& key) {
  const nlohmann::json* v = find(key);
  if (v == nullptr || v->is_null() || (v->is_string() && v->get<std::string>() == "None")) {
    effective_[key] = nullptr;
    return std::nullopt;
  }
  return string(key, "");
}

std::vector<std::string> Params::list(const std::string& key) {
  const nlohmann::json* v = find(key);
  std::vector<std::string> out;
  if (v == nullptr || v->is_null()) {
    effective_[key] = nullptr;
    return out;
  }
  if (v->is_array()) {
    for (const auto& item : *v) {
      if (!item.is_string()) bad(key, *v, "a list of strings");
      const std::string t = trim(item.get<std::string>());
      if (!t.empty()) out.push_back(t);
    }
  } else if (v->is_string()) {
    const std::string s = v->get<std::string>();
    size_t start = 0;
    while (start <= s.size()) {
      const size_t comma = s.find(',', start);
      const std::string item = trim(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (!item.empty()) out.push_back(item);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else {
    bad(key, *v, "a string or a list of strings");
  }
  effective_[key] = *v;
  return out;
}

std::string Params::repr(const std::string& key) const {
  auto it = effective_.find(key);
  return it == effective_.end() ? "None" : pyStr(*it);
}

std::string Params::joined(const std::vector<std::string>& keys) const {
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i) out += "\n";
    out += keys[i] + ":" + repr(keys[i]);
  }
  return out;
}

void Params::checkAllUsed() const {
  for (const auto& item : given_.items()) {
    if (!used_.count(item.key()))
      throw std::invalid_argument(rule_ + ": unknown parameter \"" + item.key() + "\"");
  }
}

}  // namespace strata::rules

namespace strata::rules {

std::string num(double x) {
  if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(x));
    return buf;
  }
  return stats::pyFloat(x);
}

}  // namespace strata::rules
