// JSON helpers shared by the profiler's writers and readers. Pure, thread-safe.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace strata::profiler {

// A JSON string literal for `text`; invalid UTF-8 is replaced (U+FFFD), never thrown on.
std::string jsonQuote(std::string_view text);

struct ParsedObjects {
  std::vector<nlohmann::json> objects;  // top-level objects, in file order
  size_t badLines = 0;                  // lines that did not parse (the last one included)
  bool lastLineBad = false;             // the last non-empty line did not parse (torn write)
};

// One JSON object per line (system metrics, step times). Blank lines are ignored.
ParsedObjects parseJsonLines(std::string_view text);

// A Chrome-trace JSON array as smdebug writes it ("[", then one object per line followed
// by ",", then "]"), also while still open (no "]") or torn mid-line. A complete array in
// any layout is parsed whole; otherwise line by line, ignoring "[" / "]" lines and a
// trailing ",". An object form {"traceEvents": [...]} is accepted too.
ParsedObjects parseJsonArrayTolerant(std::string_view text);

}  // namespace strata::profiler
