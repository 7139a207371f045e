// One table per enum of a config setting, read both ways: the value a config string names,
// and the name of a value, so that parsing and printing a setting cannot disagree.
#pragma once

#include <cstddef>
#include <string>

#include "core/errors.h"

namespace strata {

template <typename E>
struct NamedValue {
  E value;
  const char* name;
};

// The value called `name`; anything else throws ConfigError "<what> "<name>" (expected a or b)",
// `what` naming the setting ("optimize: unknown value").
template <typename E, size_t N>
E parseNamed(const NamedValue<E> (&table)[N], const std::string& name, const char* what) {
  std::string expected;
  for (size_t i = 0; i < N; ++i) {
    if (name == table[i].name) return table[i].value;
    expected += std::string(i == 0 ? "" : i + 1 == N ? " or " : ", ") + table[i].name;
  }
  STRATA_THROW(ConfigError, what, " \"", name, "\" (expected ", expected, ")");
}

// The name of `value` ("?" for a value missing from the table).
template <typename E, size_t N>
const char* nameOf(const NamedValue<E> (&table)[N], E value) {
  for (const NamedValue<E>& entry : table)
    if (entry.value == value) return entry.name;
  return "?";
}

}  // namespace strata
