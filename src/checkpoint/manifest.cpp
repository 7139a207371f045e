#include "checkpoint/manifest.h"

#include <cstdio>
#include <set>

#include "core/errors.h"

namespace strata::checkpoint {
namespace {

using nlohmann::json;

constexpr const char* kDirPrefix = "step-";
constexpr int kDirDigits = 12;

const json& field(const json& object, const char* key, json::value_t type, const std::string& where) {
  auto it = object.find(key);
  STRATA_CHECK(it != object.end(), where, ": missing field \"", key, "\"");
  const bool numberWanted = type == json::value_t::number_integer;
  const bool ok = numberWanted ? it->is_number_integer() : it->type() == type;
  STRATA_CHECK(ok, where, ": field \"", key, "\" has the wrong type (", it->type_name(), "): ", it->dump());
  return *it;
}

int64_t intField(const json& object, const char* key, int64_t minValue, const std::string& where) {
  const int64_t v = field(object, key, json::value_t::number_integer, where).get<int64_t>();
  STRATA_CHECK(v >= minValue, where, ": field \"", key, "\" = ", v, " is below ", minValue);
  return v;
}

bool isHexDigest(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

ShardInfo parseShard(const json& j, const std::string& where) {
  STRATA_CHECK(j.is_object(), where, ": not an object: ", j.dump());
  ShardInfo s;
  s.file = field(j, "file", json::value_t::string, where).get<std::string>();
  STRATA_CHECK(!s.file.empty() && s.file.find('/') == std::string::npos && s.file != "." && s.file != "..",
               where, ": \"file\" must be a plain file name, got \"", s.file, "\"");
  s.rank = static_cast<int>(intField(j, "rank", 0, where));
  s.ppRank = static_cast<int>(intField(j, "pp_rank", 0, where));
  s.bytes = static_cast<uint64_t>(intField(j, "bytes", 0, where));
  s.sha256 = field(j, "sha256", json::value_t::string, where).get<std::string>();
  STRATA_CHECK(isHexDigest(s.sha256), where, ": \"sha256\" is not 64 lowercase hex digits: \"", s.sha256, "\"");
  return s;
}

}  // namespace

const char* kindName(Kind kind) { return kind == Kind::kFull ? "full" : "partial"; }

json toJson(const Manifest& m) {
  json shards = json::array();
  for (const auto& s : m.shards)
    shards.push_back({{"file", s.file}, {"rank", s.rank}, {"pp_rank", s.ppRank}, {"bytes", s.bytes},
                      {"sha256", s.sha256}});
  return {{"format", kManifestFormat}, {"version", kManifestVersion}, {"step", m.step},     {"epoch", m.epoch},
          {"kind", kindName(m.kind)},  {"world_size", m.worldSize},  {"pp_size", m.ppSize}, {"dp_size", m.dpSize},
          {"created_utc", m.createdUtc}, {"shards", shards}};
}

Manifest parseManifest(const std::string& jsonText, const std::string& source) {
  json j = json::parse(jsonText, nullptr, /*allow_exceptions=*/false);
  STRATA_CHECK(!j.is_discarded() && j.is_object(), source, ": not a JSON object");
  const std::string format = field(j, "format", json::value_t::string, source).get<std::string>();
  STRATA_CHECK(format == kManifestFormat, source, ": \"format\" is \"", format, "\", expected \"", kManifestFormat, "\"");
  const int64_t version = intField(j, "version", 1, source);
  STRATA_CHECK(version == kManifestVersion, source, ": \"version\" ", version, " is not supported (this build reads ",
               kManifestVersion, ")");
  Manifest m;
  m.step = intField(j, "step", 0, source);
  m.epoch = intField(j, "epoch", 0, source);
  const std::string kind = field(j, "kind", json::value_t::string, source).get<std::string>();
  STRATA_CHECK(kind == "full" || kind == "partial", source, ": \"kind\" is \"", kind, "\", expected full or partial");
  m.kind = kind == "full" ? Kind::kFull : Kind::kPartial;
  m.worldSize = static_cast<int>(intField(j, "world_size", 1, source));
  m.ppSize = static_cast<int>(intField(j, "pp_size", 1, source));
  m.dpSize = static_cast<int>(intField(j, "dp_size", 1, source));
  STRATA_CHECK(int64_t{m.ppSize} * m.dpSize == m.worldSize, source, ": pp_size ", m.ppSize, " x dp_size ", m.dpSize,
               " != world_size ", m.worldSize);
  if (auto it = j.find("created_utc"); it != j.end() && it->is_string()) m.createdUtc = it->get<std::string>();
  const json& shards = field(j, "shards", json::value_t::array, source);
  std::set<std::string> files;
  std::set<int> ranks;
  for (size_t i = 0; i < shards.size(); ++i) {
    ShardInfo s = parseShard(shards[i], source + ": shards[" + std::to_string(i) + "]");
    STRATA_CHECK(files.insert(s.file).second, source, ": shard file \"", s.file, "\" is listed twice");
    STRATA_CHECK(s.rank < m.worldSize, source, ": shards[", i, "].rank ", s.rank, " >= world_size ", m.worldSize);
    ranks.insert(s.rank);
    m.shards.push_back(std::move(s));
  }
  if (m.kind == Kind::kFull) {
    STRATA_CHECK(m.shards.size() == 1, source, ": a full checkpoint has exactly one shard, found ", m.shards.size());
  } else {
    STRATA_CHECK(static_cast<int>(ranks.size()) == m.worldSize && m.shards.size() == ranks.size(), source,
                 ": a partial checkpoint has one shard per rank: ", m.shards.size(), " shard(s) for world_size ",
                 m.worldSize);
  }
  return m;
}

std::string checkpointDirName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "%s%0*lld", kDirPrefix, kDirDigits, static_cast<long long>(step));
  return name;
}

std::optional<int64_t> parseCheckpointDirName(const std::string& name) {
  const std::string prefix = kDirPrefix;
  if (name.size() != prefix.size() + kDirDigits || name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  int64_t step = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

std::string partialShardFile(int rank) {
  char name[32];
  std::snprintf(name, sizeof(name), "rank-%05d.pt", rank);
  return name;
}

}  // namespace strata::checkpoint
