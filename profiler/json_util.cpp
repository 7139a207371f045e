#include "profiler/json_util.h"

namespace strata::profiler {
namespace {

std::string_view trim(std::string_view s) {
  const auto isSpace = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && isSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && isSpace(s.back())) s.remove_suffix(1);
  return s;
}

// Parses each line with `clean` applied; lines `skip` accepts are ignored.
template <typename Clean, typename Skip>
ParsedObjects parseLines(std::string_view text, Clean clean, Skip skip) {
  ParsedObjects out;
  bool lastBad = false;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    const std::string_view line = clean(trim(text.substr(0, eol)));
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (line.empty() || skip(line)) continue;
    nlohmann::json obj = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
    lastBad = obj.is_discarded() || !obj.is_object();
    if (lastBad) {
      ++out.badLines;
    } else {
      out.objects.push_back(std::move(obj));
    }
  }
  out.lastLineBad = lastBad;
  return out;
}

}  // namespace

std::string jsonQuote(std::string_view text) {
  return nlohmann::json(std::string(text)).dump(-1, ' ', false,
                                                nlohmann::json::error_handler_t::replace);
}

ParsedObjects parseJsonLines(std::string_view text) {
  return parseLines(
      text, [](std::string_view l) { return l; }, [](std::string_view) { return false; });
}

ParsedObjects parseJsonArrayTolerant(std::string_view text) {
  nlohmann::json whole = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (!whole.is_discarded()) {
    if (whole.is_object() && whole.contains("traceEvents")) whole = whole["traceEvents"];
    if (whole.is_array()) {
      ParsedObjects out;
      for (auto& item : whole) {
        if (item.is_object()) out.objects.push_back(std::move(item));
        else ++out.badLines;
      }
      return out;
    }
  }
  return parseLines(
      text,
      [](std::string_view l) {
        if (!l.empty() && l.front() == '[') l = trim(l.substr(1));
        if (!l.empty() && l.back() == ']') l = trim(l.substr(0, l.size() - 1));
        if (!l.empty() && l.back() == ',') l.remove_suffix(1);
        return l;
      },
      [](std::string_view l) { return l == "[" || l == "]"; });
}

}  // namespace strata::profiler
