#include "config/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <set>

#include "core/errors.h"

namespace strata::config::detail {
namespace {

// Longest value echoed back in a message; a whole object would drown the message.
constexpr size_t kMaxDescribeChars = 60;


std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// A maximum that only guards the storage type (INT_MAX for an int field) is not worth
// mentioning, unless the value broke it.
std::string describeIntRange(int64_t min, int64_t max, const Json& value) {
  const bool aboveMax = value.is_number_unsigned()
                            ? value.get<uint64_t>() > static_cast<uint64_t>(max)
                            : value.is_number_integer() && value.get<int64_t>() > max;
  if (max >= std::numeric_limits<int>::max() && !aboveMax) max = kNoMax;
  if (min == kNoMin && max == kNoMax) return "an integer";
  if (max == kNoMax) return "an integer >= " + std::to_string(min);
  if (min == kNoMin) return "an integer <= " + std::to_string(max);
  return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

std::string describeNumberRange(double min, double max, bool minExclusive) {
  const bool hasMin = std::isfinite(min);
  const bool hasMax = std::isfinite(max);
  if (!hasMin && !hasMax) return "a number";
  if (!hasMax) return std::string("a number ") + (minExclusive ? "> " : ">= ") + formatNumber(min);
  if (!hasMin) return "a number <= " + formatNumber(max);
  return std::string("a number in ") + (minExclusive ? "(" : "[") + formatNumber(min) + ", " +
         formatNumber(max) + "]";
}

// Where nlohmann's parse_error happened, as "line:column (byte N)".
std::string parseErrorWhere(const std::string& text, size_t byte) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i + 1 < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column) + " (byte " + std::to_string(byte) +
         ")";
}

// nlohmann's what() is "[json.exception.parse_error.101] parse error at line 1, column 5:
// syntax error ..."; keep only the part after the position, which we print ourselves.
std::string parseErrorDetail(const std::string& what) {
  const size_t column = what.find("column ");
  const size_t colon = what.find(": ", column == std::string::npos ? 0 : column);
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

}  // namespace

std::string childPath(const std::string& parent, const std::string& key) {
  std::string escaped;
  for (char c : key) {
    if (c == '~')
      escaped += "~0";
    else if (c == '/')
      escaped += "~1";
    else
      escaped += c;
  }
  return parent + "/" + escaped;
}

std::string childPath(const std::string& parent, size_t index) {
  return parent + "/" + std::to_string(index);
}

std::string showPath(const std::string& path) { return path.empty() ? "(root)" : path; }

size_t editDistance(const std::string& a, const std::string& b) {
  // Optimal string alignment: Levenshtein plus adjacent transpositions ("tpc" -> "tcp"
  // is one edit, as a typist sees it). Keys are short, so a full table is fine.
  const std::string x = lowercase(a), y = lowercase(b);
  std::vector<std::vector<size_t>> d(x.size() + 1, std::vector<size_t>(y.size() + 1));
  for (size_t i = 0; i <= x.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= y.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= x.size(); ++i) {
    for (size_t j = 1; j <= y.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (x[i - 1] == y[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && x[i - 1] == y[j - 2] && x[i - 2] == y[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[x.size()][y.size()];
}

std::string nearestName(const std::string& word, const std::vector<std::string>& candidates) {
  // A typo changes about one character in four; containment catches "interval" for
  // "save_interval" and "rule_parameters" for "parameters".
  const size_t maxDistance = std::max<size_t>(1, std::min<size_t>(3, (word.size() + 2) / 4));
  const std::string w = lowercase(word);
  std::string best;
  size_t bestDistance = std::numeric_limits<size_t>::max();
  for (const std::string& candidate : candidates) {
    const size_t d = editDistance(word, candidate);
    const std::string c = lowercase(candidate);
    const bool contains = std::min(w.size(), c.size()) >= 4 &&
                          (c.find(w) != std::string::npos || w.find(c) != std::string::npos);
    if ((d <= maxDistance || contains) && d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

std::string suggestionSuffix(const std::string& word, const std::vector<std::string>& candidates,
                             const char* listLabel) {
  const std::string nearest = nearestName(word, candidates);
  if (!nearest.empty()) return "; did you mean \"" + nearest + "\"?";
  return std::string("; ") + listLabel + ": " + quoteList(candidates);
}

std::string describe(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > kMaxDescribeChars) text = text.substr(0, kMaxDescribeChars - 3) + "...";
  return text;
}

std::string quoteList(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "\"" : ", \"") + name + "\"";
  return out;
}

std::string formatNumber(double value) {
  char buffer[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

Json parseStrict(const std::string& text, const std::string& source) {
  // Track where the parser is, so a repeated key can be reported by its path.
  struct Frame {
    bool isArray;
    size_t index = 0;
    std::string key;
    std::set<std::string> keys;
  };
  std::vector<Frame> stack;
  std::string duplicatePath;
  const auto finishChild = [&stack] {
    if (!stack.empty() && stack.back().isArray) ++stack.back().index;
  };
  const auto callback = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        stack.push_back(Frame{false, 0, {}, {}});
        break;
      case Json::parse_event_t::array_start:
        stack.push_back(Frame{true, 0, {}, {}});
        break;
      case Json::parse_event_t::key: {
        Frame& frame = stack.back();
        frame.key = parsed.get<std::string>();
        if (!frame.keys.insert(frame.key).second && duplicatePath.empty()) {
          for (const Frame& f : stack)
            duplicatePath =
                f.isArray ? childPath(duplicatePath, f.index) : childPath(duplicatePath, f.key);
        }
        break;
      }
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        stack.pop_back();
        finishChild();
        break;
      case Json::parse_event_t::value:
        finishChild();
        break;
    }
    return true;
  };
  Json doc;
  try {
    doc = Json::parse(text, callback);
  } catch (const Json::parse_error& e) {
    STRATA_THROW(ConfigError, source, ":", parseErrorWhere(text, e.byte),
                 ": invalid JSON: ", parseErrorDetail(e.what()));
  }
  if (!duplicatePath.empty()) {
    STRATA_THROW(ConfigError, source, ": ", duplicatePath,
                 ": key appears twice in the same object (JSON parsers would silently keep one)");
  }
  return doc;
}

// ---------------------------------------------------------------------------------------
// Validator

void Validator::fail(const std::string& path, const std::string& what) const {
  STRATA_THROW(ConfigError, source_, ": ", showPath(path), ": ", what);
}

void Validator::failUnknownKey(const std::string& objectPath, const std::string& key,
                               const std::vector<std::string>& validKeys) const {
  STRATA_THROW(ConfigError, source_, ": unknown key \"", key, "\" at ", childPath(objectPath, key),
               suggestionSuffix(key, validKeys, "valid keys here"));
}

void Validator::expectObject(const Json& value, const std::string& path) const {
  if (!value.is_object()) fail(path, "expected an object, got " + describe(value));
}

void Validator::expectKnownKeys(const Json& object, const std::string& path,
                                const std::vector<std::string>& validKeys) const {
  expectObject(object, path);
  for (const auto& item : object.items()) {
    if (std::find(validKeys.begin(), validKeys.end(), item.key()) == validKeys.end())
      failUnknownKey(path, item.key(), validKeys);
  }
}

const Json& Validator::expectArray(const Json& value, const std::string& path) const {
  if (!value.is_array()) fail(path, "expected an array, got " + describe(value));
  return value;
}

int64_t Validator::expectInt(const Json& value, const std::string& path, int64_t min,
                             int64_t max) const {
  const std::string expected =
      "expected " + describeIntRange(min, max, value) + ", got " + describe(value);
  if (!value.is_number_integer()) fail(path, expected);
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(kNoMax))
    fail(path, expected);
  const int64_t v = value.get<int64_t>();
  if (v < min || v > max) fail(path, expected);
  return v;
}

double Validator::expectNumber(const Json& value, const std::string& path, double min, double max,
                               bool minExclusive) const {
  const std::string expected =
      "expected " + describeNumberRange(min, max, minExclusive) + ", got " + describe(value);
  if (!value.is_number()) fail(path, expected);
  const double v = value.get<double>();
  const bool belowMin = minExclusive ? !(v > min) : !(v >= min);
  if (!std::isfinite(v) || belowMin || v > max) fail(path, expected);
  return v;
}

bool Validator::expectBool(const Json& value, const std::string& path) const {
  if (!value.is_boolean()) fail(path, "expected true or false, got " + describe(value));
  return value.get<bool>();
}

std::string Validator::expectString(const Json& value, const std::string& path) const {
  if (!value.is_string() || value.get_ref<const std::string&>().empty())
    fail(path, "expected a non-empty string, got " + describe(value));
  return value.get<std::string>();
}

std::string Validator::expectEnum(const Json& value, const std::string& path,
                                  const std::vector<std::string>& allowed) const {
  if (!value.is_string())
    fail(path, "expected one of " + quoteList(allowed) + ", got " + describe(value));
  const std::string& v = value.get_ref<const std::string&>();
  if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
    std::string what = describe(value) + " is not one of " + quoteList(allowed);
    const std::string nearest = nearestName(v, allowed);
    if (!nearest.empty()) what += "; did you mean \"" + nearest + "\"?";
    fail(path, what);
  }
  return v;
}

std::vector<std::string> Validator::expectStringList(const Json& value,
                                                     const std::string& path) const {
  std::vector<std::string> items;
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    size_t start = 0;
    while (true) {
      const size_t comma = text.find(',', start);
      const std::string item = trim(text.substr(start, comma - start));
      if (item.empty()) fail(path, "empty name in the comma-separated list " + describe(value));
      items.push_back(item);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return items;
  }
  if (!value.is_array())
    fail(path, "expected an array of strings or a comma-separated string, got " + describe(value));
  for (size_t i = 0; i < value.size(); ++i)
    items.push_back(expectString(value[i], childPath(path, i)));
  return items;
}

std::string Validator::expectRegex(const Json& value, const std::string& path) const {
  if (!value.is_string() || value.get_ref<const std::string&>().empty())
    fail(path, "expected a non-empty regular expression string, got " + describe(value));
  const std::string& pattern = value.get_ref<const std::string&>();
  try {
    std::regex compiled(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    fail(path,
         "invalid regular expression " + describe(value) + " (ECMAScript syntax): " + e.what());
  }
  return pattern;
}

// ---------------------------------------------------------------------------------------
// ObjectReader

ObjectReader::ObjectReader(const Validator& validator, const Json& object, std::string path,
                           std::vector<std::string> validKeys)
    : validator_(validator), object_(object), path_(std::move(path)) {
  validator_.expectKnownKeys(object_, path_, validKeys);
}

void ObjectReader::read(const std::string& key, int& out, int64_t min, int64_t max) const {
  if (has(key)) out = static_cast<int>(validator_.expectInt(at(key), pathOf(key), min, max));
}

void ObjectReader::read(const std::string& key, int64_t& out, int64_t min, int64_t max) const {
  if (has(key)) out = validator_.expectInt(at(key), pathOf(key), min, max);
}

void ObjectReader::read(const std::string& key, std::optional<int64_t>& out, int64_t min,
                        int64_t max) const {
  if (!has(key)) return;
  if (at(key).is_null()) {
    out.reset();
    return;
  }
  out = validator_.expectInt(at(key), pathOf(key), min, max);
}

void ObjectReader::read(const std::string& key, double& out, double min, double max,
                        bool minExclusive) const {
  if (has(key)) out = validator_.expectNumber(at(key), pathOf(key), min, max, minExclusive);
}

void ObjectReader::read(const std::string& key, bool& out) const {
  if (has(key)) out = validator_.expectBool(at(key), pathOf(key));
}

void ObjectReader::read(const std::string& key, std::string& out) const {
  if (has(key)) out = validator_.expectString(at(key), pathOf(key));
}

void ObjectReader::readEnum(const std::string& key, std::string& out,
                            const std::vector<std::string>& allowed) const {
  if (has(key)) out = validator_.expectEnum(at(key), pathOf(key), allowed);
}

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace strata::config::detail
