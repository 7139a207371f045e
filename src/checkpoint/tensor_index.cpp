#include "checkpoint/tensor_index.h"

#include <map>
#include <set>
#include <sstream>

#include "core/errors.h"

namespace strata::checkpoint {
namespace {

using nlohmann::json;

const json& need(const json& object, const char* key, const std::string& where) {
  auto it = object.find(key);
  STRATA_CHECK(it != object.end(), where, ": missing field \"", key, "\"");
  return *it;
}

std::string stringField(const json& object, const char* key, const std::string& where) {
  const json& v = need(object, key, where);
  STRATA_CHECK(v.is_string(), where, ": field \"", key, "\" is not a string: ", v.dump());
  return v.get<std::string>();
}

std::string optionalString(const json& object, const char* key, const std::string& where) {
  return object.contains(key) ? stringField(object, key, where) : std::string();
}

TensorEntry parseTensor(const json& j, const std::string& where) {
  STRATA_CHECK(j.is_object(), where, ": not an object: ", j.dump());
  TensorEntry e;
  e.path = stringField(j, "path", where);
  STRATA_CHECK(!e.path.empty(), where, ": empty \"path\"");
  e.dtype = stringField(j, "dtype", where);
  const json& shape = need(j, "shape", where);
  STRATA_CHECK(shape.is_array(), where, ": \"shape\" is not an array: ", shape.dump());
  for (const json& d : shape) {
    STRATA_CHECK(d.is_number_integer() && d.get<int64_t>() >= 0, where, ": bad dimension in \"shape\": ", shape.dump());
    e.shape.push_back(d.get<int64_t>());
  }
  e.record = optionalString(j, "record", where);
  e.aliasOf = optionalString(j, "alias_of", where);
  STRATA_CHECK(e.record.empty() != e.aliasOf.empty(), where, ": \"", e.path,
               "\" needs exactly one of \"record\" and \"alias_of\"");
  if (j.contains("buffer")) {
    STRATA_CHECK(j["buffer"].is_boolean(), where, ": \"buffer\" is not a boolean: ", j["buffer"].dump());
    e.buffer = j["buffer"].get<bool>();
  }
  return e;
}

void checkAliases(const TensorIndex& index, const std::string& source) {
  std::map<std::string, const TensorEntry*> stored;
  for (const auto& e : index.tensors)
    if (e.aliasOf.empty()) stored.emplace(e.path, &e);
  for (const auto& e : index.tensors) {
    if (e.aliasOf.empty()) continue;
    auto it = stored.find(e.aliasOf);
    STRATA_CHECK(it != stored.end(), source, ": \"", e.path, "\" is an alias of \"", e.aliasOf,
                 "\", which the file does not store");
    STRATA_CHECK(it->second->dtype == e.dtype && it->second->shape == e.shape, source, ": alias \"", e.path,
                 "\" differs from \"", e.aliasOf, "\" in dtype or shape");
  }
}

}  // namespace

std::string formatShape(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

json toJson(const TensorIndex& index) {
  json tensors = json::array();
  for (const auto& e : index.tensors) {
    json t = {{"path", e.path}, {"dtype", e.dtype}, {"shape", e.shape}};
    if (e.aliasOf.empty()) t["record"] = e.record;
    else t["alias_of"] = e.aliasOf;
    if (e.buffer) t["buffer"] = true;
    tensors.push_back(std::move(t));
  }
  json out = {{"format", kTensorIndexFormat}, {"version", kTensorIndexVersion}, {"tensors", std::move(tensors)}};
  if (!index.optimizerKind.empty()) {
    json entries = json::array();
    for (const auto& o : index.optimizer) entries.push_back({{"path", o.path}, {"record", o.record}});
    out["optimizer"] = {{"kind", index.optimizerKind}, {"entries", std::move(entries)}};
  }
  if (!index.stateRecord.empty()) out["state"] = index.stateRecord;
  return out;
}

TensorIndex parseTensorIndex(const std::string& jsonText, const std::string& source) {
  const json j = json::parse(jsonText, nullptr, /*allow_exceptions=*/false);
  STRATA_CHECK(!j.is_discarded() && j.is_object(), source, ": the tensor index is not a JSON object");
  const std::string format = stringField(j, "format", source);
  STRATA_CHECK(format == kTensorIndexFormat, source, ": \"format\" is \"", format, "\", expected \"",
               kTensorIndexFormat, "\"");
  const json& version = need(j, "version", source);
  STRATA_CHECK(version.is_number_integer() && version.get<int64_t>() == kTensorIndexVersion, source,
               ": tensor index version ", version.dump(), " is not supported (this build reads ", kTensorIndexVersion,
               ")");
  TensorIndex index;
  const json& tensors = need(j, "tensors", source);
  STRATA_CHECK(tensors.is_array(), source, ": \"tensors\" is not an array");
  std::set<std::string> paths, records;
  for (size_t i = 0; i < tensors.size(); ++i) {
    TensorEntry e = parseTensor(tensors[i], source + ": tensors[" + std::to_string(i) + "]");
    STRATA_CHECK(paths.insert(e.path).second, source, ": \"", e.path, "\" is listed twice");
    STRATA_CHECK(e.record.empty() || records.insert(e.record).second, source, ": record \"", e.record,
                 "\" is used twice");
    index.tensors.push_back(std::move(e));
  }
  checkAliases(index, source);
  if (j.contains("optimizer")) {
    const json& opt = j["optimizer"];
    STRATA_CHECK(opt.is_object(), source, ": \"optimizer\" is not an object");
    index.optimizerKind = stringField(opt, "kind", source + ": optimizer");
    const json& entries = need(opt, "entries", source + ": optimizer");
    STRATA_CHECK(entries.is_array(), source, ": optimizer \"entries\" is not an array");
    for (const json& e : entries) {
      const std::string where = source + ": optimizer entry";
      STRATA_CHECK(e.is_object(), where, ": not an object: ", e.dump());
      index.optimizer.push_back({stringField(e, "path", where), stringField(e, "record", where)});
      STRATA_CHECK(records.insert(index.optimizer.back().record).second, source, ": record \"",
                   index.optimizer.back().record, "\" is used twice");
    }
  }
  index.stateRecord = optionalString(j, "state", source);
  return index;
}

std::optional<std::string> firstDifference(const std::vector<TensorEntry>& checkpoint,
                                           const std::vector<TensorEntry>& model) {
  auto byPath = [](const std::vector<TensorEntry>& entries) {
    std::map<std::string, const TensorEntry*> out;
    for (const auto& e : entries) out.emplace(e.path, &e);
    return out;
  };
  const auto saved = byPath(checkpoint), wanted = byPath(model);
  auto s = saved.begin();
  auto w = wanted.begin();
  while (s != saved.end() || w != wanted.end()) {
    if (w == wanted.end() || (s != saved.end() && s->first < w->first))
      return "the checkpoint has \"" + s->first + "\", which the model does not";
    if (s == saved.end() || w->first < s->first)
      return "the model has \"" + w->first + "\", which the checkpoint does not";
    const TensorEntry& a = *s->second;
    const TensorEntry& b = *w->second;
    if (a.shape != b.shape)
      return "\"" + a.path + "\" has shape " + formatShape(a.shape) + " in the checkpoint, " + formatShape(b.shape) +
             " in the model";
    if (a.dtype != b.dtype)
      return "\"" + a.path + "\" has dtype " + a.dtype + " in the checkpoint, " + b.dtype + " in the model";
    ++s;
    ++w;
  }
  return std::nullopt;
}

ShardCatalog::ShardCatalog(const std::vector<TensorIndex>& shards, const std::vector<std::string>& files,
                           size_t preferred) {
  STRATA_CHECK(files.size() == shards.size(), "ShardCatalog: ", files.size(), " file names for ", shards.size(),
               " shards");
  std::vector<size_t> order;
  if (preferred < shards.size()) order.push_back(preferred);
  for (size_t s = 0; s < shards.size(); ++s)
    if (s != preferred) order.push_back(s);
  optimizerOfShard_.resize(shards.size());
  std::string kindFile;
  for (size_t s : order) {
    const TensorIndex& index = shards[s];
    if (!index.optimizerKind.empty()) {
      STRATA_CHECK(optimizerKind_.empty() || optimizerKind_ == index.optimizerKind, "checkpoint shards ", kindFile,
                   " and ", files[s], " hold state of different optimizers (", optimizerKind_, " and ",
                   index.optimizerKind, ")");
      if (optimizerKind_.empty()) kindFile = files[s];
      optimizerKind_ = index.optimizerKind;
    }
    for (const OptimizerEntry& o : index.optimizer) optimizerOfShard_[s].emplace(o.path, o.record);
    for (const TensorEntry& e : index.tensors) {
      auto [it, inserted] = entries_.emplace(e.path, e);
      const auto& seen = locations_[e.path];
      STRATA_CHECK(inserted || (it->second.dtype == e.dtype && it->second.shape == e.shape), "checkpoint shards ",
                   files[seen.front().shard], " and ", files[s], " disagree on \"", e.path, "\": ", it->second.dtype,
                   " ", formatShape(it->second.shape), " against ", e.dtype, " ", formatShape(e.shape));
      locations_[e.path].push_back({s, e.aliasOf.empty() ? e.path : e.aliasOf});
    }
  }
}

std::optional<ShardCatalog::Location> ShardCatalog::tensor(const std::string& path) const {
  auto it = locations_.find(path);
  if (it == locations_.end()) return std::nullopt;
  return it->second.front();
}

std::optional<ShardCatalog::Record> ShardCatalog::optimizerState(const std::string& path) const {
  auto it = locations_.find(path);
  if (it == locations_.end()) return std::nullopt;
  for (const Location& l : it->second) {
    const auto& records = optimizerOfShard_[l.shard];
    for (const std::string& key : {l.storedPath, path}) {
      auto r = records.find(key);
      if (r != records.end()) return Record{l.shard, r->second};
    }
  }
  return std::nullopt;
}

std::vector<TensorEntry> ShardCatalog::entries() const {
  std::vector<TensorEntry> out;
  for (const auto& item : entries_) out.push_back(item.second);
  return out;
}

}  // namespace strata::checkpoint
