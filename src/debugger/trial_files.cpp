#include "debugger/trial_files.h"

#include <nlohmann/json.hpp>

namespace strata::debugger {
namespace {

using OrderedJson = nlohmann::ordered_json;
using Json = nlohmann::json;

OrderedJson saveConfigJson(const config::SaveConfig& save) {
  OrderedJson j;
  j["save_interval"] = save.saveInterval;
  j["save_steps"] = save.saveSteps;
  j["start_step"] = save.startStep;
  j["end_step"] = save.endStep ? OrderedJson(*save.endStep) : OrderedJson(nullptr);
  return j;
}

std::string joinReductions(const std::vector<Reduction>& reductions) {
  std::string out;
  for (const Reduction& r : reductions) {
    if (!out.empty()) out += ",";
    out += reductionConfigName(r);
  }
  return out;
}

std::vector<std::string> stringList(const Json& value) {
  std::vector<std::string> out;
  if (value.is_string()) {
    out.push_back(value.get<std::string>());
  } else if (value.is_array()) {
    for (const Json& item : value)
      if (item.is_string()) out.push_back(item.get<std::string>());
  }
  return out;
}

// Parses `text` as a JSON object and reads it with read(j), which returns false after
// setting *error for the checks it makes. Text that is no JSON object gives `notAnObject`;
// a field of the wrong type or a missing one (nlohmann's exception) "malformed <what>: ...".
template <typename Read>
bool parseJsonObject(const std::string& text, const char* notAnObject, const char* what, std::string* error,
                     Read&& read) {
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    *error = notAnObject;
    return false;
  }
  try {
    return read(j);
  } catch (const Json::exception& e) {
    *error = std::string("malformed ") + what + ": " + e.what();
    return false;
  }
}

}  // namespace

std::string indexFileJson(const IndexFile& index) {
  OrderedJson j;
  j["meta"]["mode"] = modeName(index.mode);
  j["meta"]["mode_step"] = index.modeStep;
  j["meta"]["event_file_name"] = index.eventFileName;
  j["tensor_payload"] = OrderedJson::array();
  for (const IndexEntry& e : index.tensors) {
    OrderedJson item;
    item["tensorname"] = e.tensorName;
    item["start_idx"] = e.startIdx;
    item["length"] = e.length;
    j["tensor_payload"].push_back(std::move(item));
  }
  j["shape_payload"] = OrderedJson::array();
  for (const ShapeEntry& s : index.shapes) {
    OrderedJson item;
    item["tensorname"] = s.tensorName;
    item["originalname"] = s.originalName;
    item["shape"] = s.shape;
    j["shape_payload"].push_back(std::move(item));
  }
  return j.dump();
}

bool parseIndexFile(const std::string& text, IndexFile* out, std::string* error) {
  return parseJsonObject(text, "not a JSON object (empty or corrupt index file)", "index", error, [&](const Json& j) {
    if (!j.contains("meta") || !j["meta"].is_object() || j["meta"].empty()) {
      *error = "meta section is missing or empty";
      return false;
    }
    if (!j.contains("tensor_payload") || !j["tensor_payload"].is_array()) {
      *error = "tensor_payload section is missing";
      return false;
    }
    const Json& meta = j["meta"];
    std::string mode = meta.at("mode").get<std::string>();
    // smdebug strips the name and accepts "ModeKeys.TRAIN"-style leftovers poorly; we accept both.
    while (!mode.empty() && mode.back() == ' ') mode.pop_back();
    while (!mode.empty() && mode.front() == ' ') mode.erase(mode.begin());
    if (mode.rfind("ModeKeys.", 0) == 0) mode = mode.substr(9);
    if (!parseModeName(mode, &out->mode)) {
      *error = "unknown mode \"" + mode + "\"";
      return false;
    }
    out->modeStep = meta.at("mode_step").get<int64_t>();
    out->eventFileName = meta.value("event_file_name", std::string());
    out->tensors.clear();
    for (const Json& item : j["tensor_payload"]) {
      IndexEntry e;
      e.tensorName = item.at("tensorname").get<std::string>();
      e.startIdx = item.at("start_idx").get<uint64_t>();
      e.length = item.at("length").get<uint64_t>();
      out->tensors.push_back(std::move(e));
    }
    out->shapes.clear();
    if (j.contains("shape_payload") && j["shape_payload"].is_array()) {
      for (const Json& item : j["shape_payload"]) {
        ShapeEntry s;
        s.tensorName = item.at("tensorname").get<std::string>();
        s.originalName = item.value("originalname", s.tensorName);
        s.shape = item.at("shape").get<std::vector<int64_t>>();
        out->shapes.push_back(std::move(s));
      }
    }
    if (!out->tensors.empty() && out->eventFileName.empty()) {
      *error = "meta.event_file_name is missing";
      return false;
    }
    return true;
  });
}

std::string collectionsFileJson(const std::vector<Collection>& collections, int numWorkers) {
  OrderedJson j;
  j["collections"] = OrderedJson::object();
  for (const Collection& c : collections) {
    OrderedJson item;
    item["name"] = c.name;
    item["include_regex"] = c.includeRegex;
    item["tensor_names"] = OrderedJson::array();
    item["reduction_config"]["save_raw_tensor"] = c.saveRawTensor;
    item["reduction_config"]["reductions"] = joinReductions(c.reductions);
    item["reduction_config"]["save_shape"] = c.saveShape;
    for (Mode m : kAllModes) item["save_config"][modeName(m)] = saveConfigJson(c.saveFor(m));
    item["save_histogram"] = c.saveHistogram;
    j["collections"][c.name] = std::move(item);
  }
  j["_meta"]["num_workers"] = numWorkers;
  return j.dump();
}

bool parseCollectionsFile(const std::string& text, CollectionsFile* out, std::string* error) {
  return parseJsonObject(text, "not a JSON object", "collections file", error, [&](const Json& j) {
    out->numWorkers = 1;
    if (j.contains("_meta") && j["_meta"].is_object() && j["_meta"].contains("num_workers"))
      out->numWorkers = j["_meta"]["num_workers"].get<int>();
    if (out->numWorkers < 1) {
      *error = "_meta.num_workers must be >= 1, got " + std::to_string(out->numWorkers);
      return false;
    }
    out->collections.clear();
    if (!j.contains("collections") || !j["collections"].is_object()) {
      *error = "\"collections\" object is missing";
      return false;
    }
    for (const auto& [name, item] : j["collections"].items()) {
      CollectionsFile::Entry e;
      if (item.is_object()) {
        if (item.contains("include_regex")) e.includeRegex = stringList(item["include_regex"]);
        if (item.contains("tensor_names")) e.tensorNames = stringList(item["tensor_names"]);
      }
      out->collections[name] = std::move(e);
    }
    return true;
  });
}

}  // namespace strata::debugger
