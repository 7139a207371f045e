// A small, pure validator for JSON documents: typed reads with ranges, fixed key sets
// with nearest-key suggestions, and messages that name the JSON pointer of the offending
// value and echo what was received:
//
//   job.json: /modelparallel/partitions: expected an integer >= 1, got "two"
//   job.json: unknown key "modelparalel" at /modelparalel; did you mean "modelparallel"?
//
// Every check throws strata::ConfigError at the first problem (no error lists: the first
// error is the one to fix, and later ones are often its consequences). All functions are
// thread-safe; the classes hold only const state.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace strata::config::detail {

using Json = nlohmann::json;

constexpr int64_t kNoMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();

// JSON pointer of a child ("/a" + "b" -> "/a/b"), escaping '~' and '/' per RFC 6901.
std::string childPath(const std::string& parent, const std::string& key);
std::string childPath(const std::string& parent, size_t index);
// The pointer as shown in messages: the root "" reads "(root)".
std::string showPath(const std::string& path);

// Edit distance counting insertions, deletions, substitutions and adjacent
// transpositions, ASCII case-insensitive.
size_t editDistance(const std::string& a, const std::string& b);
// The candidate most likely meant by `word` (a small edit distance relative to its length,
// or one containing the other), or "" when none is close enough to suggest.
std::string nearestName(const std::string& word, const std::vector<std::string>& candidates);
// "; did you mean "x"?" or, with no close candidate, "; valid names here: "a", "b"".
std::string suggestionSuffix(const std::string& word, const std::vector<std::string>& candidates,
                             const char* listLabel);

// The compact dump of a value for messages, cut to about 60 characters.
std::string describe(const Json& value);
// {"a", "b"} -> "\"a\", \"b\"".
std::string quoteList(const std::vector<std::string>& names);
// 25 -> "25", 0.5 -> "0.5": shortest round-trippable form for messages.
std::string formatNumber(double value);

// Parses `text`. A syntax error or a key repeated within one object (nlohmann would keep
// the last silently) throws ConfigError naming line, column and byte offset, or the path.
Json parseStrict(const std::string& text, const std::string& source);

// Typed checks of single values. `path` is the JSON pointer of `value`.
class Validator {
 public:
  explicit Validator(std::string source) : source_(std::move(source)) {}
  const std::string& source() const { return source_; }

  // Throws ConfigError "<source>: <path>: <what>".
  [[noreturn]] void fail(const std::string& path, const std::string& what) const;
  // Throws the unknown-key message with the nearest valid key (or the list of them).
  [[noreturn]] void failUnknownKey(const std::string& objectPath, const std::string& key,
                                   const std::vector<std::string>& validKeys) const;

  void expectObject(const Json& value, const std::string& path) const;
  void expectKnownKeys(const Json& object, const std::string& path,
                       const std::vector<std::string>& validKeys) const;
  const Json& expectArray(const Json& value, const std::string& path) const;
  int64_t expectInt(const Json& value, const std::string& path, int64_t min, int64_t max) const;
  // A finite number in [min, max] (or (min, max] when minExclusive).
  double expectNumber(const Json& value, const std::string& path, double min, double max,
                      bool minExclusive = false) const;
  bool expectBool(const Json& value, const std::string& path) const;
  std::string expectString(const Json& value, const std::string& path) const;  // non-empty
  std::string expectEnum(const Json& value, const std::string& path,
                         const std::vector<std::string>& allowed) const;
  // A JSON array of non-empty strings, or one comma-separated string ("max,mean"), the form
  // SageMaker's CollectionConfig parameters use.
  std::vector<std::string> expectStringList(const Json& value, const std::string& path) const;
  // A non-empty ECMAScript regular expression that std::regex accepts.
  std::string expectRegex(const Json& value, const std::string& path) const;

 private:
  std::string source_;
};

// Reads the members of one JSON object whose key set is fixed; the constructor rejects
// unknown keys. Absent keys leave the output untouched, so it keeps its default.
class ObjectReader {
 public:
  ObjectReader(const Validator& validator, const Json& object, std::string path,
               std::vector<std::string> validKeys);

  bool has(const std::string& key) const { return object_.contains(key); }
  const Json& at(const std::string& key) const { return object_.at(key); }
  std::string pathOf(const std::string& key) const { return childPath(path_, key); }
  const std::string& path() const { return path_; }
  const Validator& validator() const { return validator_; }

  void read(const std::string& key, int& out, int64_t min, int64_t max) const;
  void read(const std::string& key, int64_t& out, int64_t min, int64_t max) const;
  // JSON null is allowed and means "unset".
  void read(const std::string& key, std::optional<int64_t>& out, int64_t min, int64_t max) const;
  void read(const std::string& key, double& out, double min, double max,
            bool minExclusive = false) const;
  void read(const std::string& key, bool& out) const;
  void read(const std::string& key, std::string& out) const;
  void readEnum(const std::string& key, std::string& out,
                const std::vector<std::string>& allowed) const;

 private:
  const Validator& validator_;
  const Json& object_;
  std::string path_;
};

// ASCII lower case (names compared without regard to case).
std::string lowercase(std::string s);

}  // namespace strata::config::detail
