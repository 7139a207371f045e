// The "debugger" section: smdebug's hook save config and collections (specs/smdebug.md
// §1.5, §1.6, §1.8). Collections inherit the section's save settings key by key.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "config/sections.h"

namespace strata::config {

bool SaveConfig::shouldSave(int64_t step) const {
  if (std::binary_search(saveSteps.begin(), saveSteps.end(), step)) return true;
  if (step < startStep || (endStep && step >= *endStep)) return false;
  return step % saveInterval == 0;
}

const std::array<const char*, kNumSaveModes>& saveModeNames() {
  static const std::array<const char*, kNumSaveModes> kNames = {"TRAIN", "EVAL", "PREDICT", "GLOBAL"};
  return kNames;
}

const std::vector<std::string>& builtinCollectionNames() {
  // smdebug CollectionKeys that mean something for PyTorch models; the TensorFlow and
  // XGBoost ones (tensorflow_summaries, trees, full_shap...) have nothing to select here.
  static const std::vector<std::string> kNames = {
      "all",    "default", "weights", "biases",  "gradients",  "losses",
      "inputs", "outputs", "layers",  "metrics", "sm_metrics", "optimizer_variables"};
  return kNames;
}

}  // namespace strata::config

namespace strata::config::detail {
namespace {

// smdebug forces these to raw scalars with no reductions (NON_REDUCTION_COLLECTIONS).
const std::set<std::string> kScalarCollections = {"losses", "metrics", "sm_metrics"};

// Canonical reduction names as smdebug's ReductionConfig writes them; "l1"/"l2" are
// accepted as short forms of the norms.
const std::vector<std::string>& canonicalReductions() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const char* prefix : {"", "abs_"}) {
      for (const char* base :
           {"min", "max", "mean", "std", "variance", "sum", "prod", "l1_norm", "l2_norm"})
        names.push_back(std::string(prefix) + base);
    }
    return names;
  }();
  return kNames;
}

std::string canonicalReduction(const std::string& name) {
  if (name == "l1" || name == "l2" || name == "abs_l1" || name == "abs_l2") return name + "_norm";
  return name;
}

bool isValidCollectionName(const std::string& name) {
  // The name becomes part of file and tensor names, so keep it to a portable set.
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

const std::vector<std::string> kSaveKeys = {"save_interval", "start_step", "end_step", "save_steps"};

// Reads the save keys present in `r` over `save`, which holds the inherited values.
void readSaveKeys(const ObjectReader& r, SaveConfig& save) {
  const Validator& v = r.validator();
  r.read("save_interval", save.saveInterval, 1, kNoMax);
  r.read("start_step", save.startStep, 0, kNoMax);
  r.read("end_step", save.endStep, 0, kNoMax);
  if (r.has("save_steps")) {
    const std::string path = r.pathOf("save_steps");
    const Json& steps = v.expectArray(r.at("save_steps"), path);
    save.saveSteps.clear();
    for (size_t i = 0; i < steps.size(); ++i)
      save.saveSteps.push_back(v.expectInt(steps[i], childPath(path, i), 0, kNoMax));
    std::sort(save.saveSteps.begin(), save.saveSteps.end());
    save.saveSteps.erase(std::unique(save.saveSteps.begin(), save.saveSteps.end()),
                         save.saveSteps.end());
  }
}

// The effective range must be non-empty; checked once all levels are applied (an inherited
// start_step may be raised by a later level together with end_step).
void checkSaveRange(const Validator& v, const SaveConfig& save, const std::string& path) {
  if (save.endStep && *save.endStep <= save.startStep) {
    v.fail(path, "end_step " + std::to_string(*save.endStep) + " must be greater than start_step " +
                     std::to_string(save.startStep) + " (end_step is exclusive)");
  }
}

void readSaveConfig(const ObjectReader& r, SaveConfig& save) {
  readSaveKeys(r, save);
  checkSaveRange(r.validator(), save, r.has("end_step") ? r.pathOf("end_step") : r.pathOf("start_step"));
}

std::vector<std::string> withSaveKeys(std::vector<std::string> keys) {
  keys.insert(keys.end(), kSaveKeys.begin(), kSaveKeys.end());
  return keys;
}

// Applies `r`'s "save_config" ({"TRAIN": {save keys}, "EVAL": ...}, smdebug's
// mode_save_configs) over `modes`, each of which already holds its inherited values.
void readModeSaveConfigs(const ObjectReader& r, ModeSaveConfigs& modes) {
  const Validator& v = r.validator();
  const auto& names = saveModeNames();
  if (r.has("save_config")) {
    const std::string path = r.pathOf("save_config");
    const std::vector<std::string> valid(names.begin(), names.end());
    v.expectObject(r.at("save_config"), path);
    const ObjectReader byMode(v, r.at("save_config"), path, valid);
    for (size_t m = 0; m < kNumSaveModes; ++m) {
      if (!byMode.has(names[m])) continue;
      const std::string modePath = byMode.pathOf(names[m]);
      v.expectObject(byMode.at(names[m]), modePath);
      const ObjectReader keys(v, byMode.at(names[m]), modePath, kSaveKeys);
      readSaveKeys(keys, modes[m]);
    }
  }
  for (size_t m = 0; m < kNumSaveModes; ++m) {
    const std::string where = r.has("save_config") ? childPath(r.pathOf("save_config"), std::string(names[m])) : r.path();
    if (modes[m].endStep && *modes[m].endStep <= modes[m].startStep)
      v.fail(where, std::string(names[m]) + " schedule: end_step " + std::to_string(*modes[m].endStep) +
                        " must be greater than start_step " + std::to_string(modes[m].startStep) +
                        " (end_step is exclusive)");
  }
}

std::vector<std::string> readReductions(const ObjectReader& r, const std::string& collection) {
  if (!r.has("reductions")) return {};
  const Validator& v = r.validator();
  const std::string path = r.pathOf("reductions");
  const std::vector<std::string> given = v.expectStringList(r.at("reductions"), path);
  if (!given.empty() && kScalarCollections.count(collection)) {
    v.fail(path, "collection \"" + collection +
                     "\" holds scalars, which are always saved raw; remove \"reductions\"");
  }
  std::vector<std::string> reductions;
  for (const std::string& name : given) {
    const std::string canonical = canonicalReduction(name);
    const auto& valid = canonicalReductions();
    if (std::find(valid.begin(), valid.end(), canonical) == valid.end())
      v.fail(path, "\"" + name + "\" is not a reduction" +
                       suggestionSuffix(name, valid, "valid reductions"));
    if (std::find(reductions.begin(), reductions.end(), canonical) != reductions.end())
      v.fail(path, "reduction \"" + canonical + "\" is listed twice");
    reductions.push_back(canonical);
  }
  return reductions;
}

CollectionConfig parseCollection(const Validator& v, const Json& item, const std::string& path,
                                 const SaveConfig& inherited, const ModeSaveConfigs& inheritedModes) {
  const ObjectReader r(v, item, path,
                       withSaveKeys({"name", "include_regex", "save_config", "reductions",
                                     "save_raw_tensor", "save_shape", "save_histogram"}));
  CollectionConfig c;
  if (!r.has("name")) v.fail(path, "a collection needs a \"name\"");
  c.name = v.expectString(r.at("name"), r.pathOf("name"));
  if (!isValidCollectionName(c.name))
    v.fail(r.pathOf("name"),
           describe(r.at("name")) + " may use only letters, digits, '_', '-' and '.'");
  const auto& builtins = builtinCollectionNames();
  const bool builtin = std::find(builtins.begin(), builtins.end(), c.name) != builtins.end();
  if (r.has("include_regex")) {
    const std::string p = r.pathOf("include_regex");
    const Json& value = r.at("include_regex");
    if (value.is_array()) {
      for (size_t i = 0; i < value.size(); ++i)
        c.includeRegex.push_back(v.expectRegex(value[i], childPath(p, i)));
    } else {
      c.includeRegex.push_back(v.expectRegex(value, p));
    }
  }
  if (!builtin && c.includeRegex.empty()) {
    const std::string nearest = nearestName(c.name, builtins);
    v.fail(path,
           "\"" + c.name + "\" is not a built-in collection" +
               (nearest.empty() ? "" : " (did you mean \"" + nearest + "\"?)") +
               ", so it needs \"include_regex\"; built-in collections: " + quoteList(builtins));
  }
  c.save = inherited;
  readSaveConfig(r, c.save);
  c.modeSave = inheritedModes;
  for (SaveConfig& mode : c.modeSave) readSaveKeys(r, mode);
  readModeSaveConfigs(r, c.modeSave);
  r.read("save_shape", c.saveShape);
  r.read("save_histogram", c.saveHistogram);
  c.reductions = readReductions(r, c.name);
  c.saveRawTensor = c.reductions.empty();
  r.read("save_raw_tensor", c.saveRawTensor);
  if (!c.saveRawTensor && c.reductions.empty() && !c.saveShape) {
    v.fail(path, "collection \"" + c.name +
                     "\" would save nothing: \"save_raw_tensor\" is false and it has no \"reductions\" "
                     "(nor \"save_shape\")");
  }
  return c;
}

Json saveConfigToJson(const SaveConfig& save, Json out) {
  out["save_interval"] = save.saveInterval;
  out["start_step"] = save.startStep;
  out["end_step"] = save.endStep ? Json(*save.endStep) : Json(nullptr);
  out["save_steps"] = save.saveSteps;
  return out;
}

Json modeSaveConfigsToJson(const ModeSaveConfigs& modes) {
  Json out = Json::object();
  for (size_t m = 0; m < kNumSaveModes; ++m) out[saveModeNames()[m]] = saveConfigToJson(modes[m], Json::object());
  return out;
}

}  // namespace

DebuggerConfig parseDebugger(const Validator& v, const Json& section, const std::string& path) {
  DebuggerConfig dc;
  const ObjectReader r(v, section, path, withSaveKeys({"collections", "save_config", "include_workers"}));
  readSaveConfig(r, dc.save);
  dc.modeSave.fill(dc.save);
  readModeSaveConfigs(r, dc.modeSave);
  r.readEnum("include_workers", dc.includeWorkers, {"one", "all"});
  if (!r.has("collections")) return dc;
  const std::string p = r.pathOf("collections");
  const Json& items = v.expectArray(r.at("collections"), p);
  std::map<std::string, std::string> seen;  // name -> path of its first definition
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string itemPath = childPath(p, i);
    CollectionConfig c = parseCollection(v, items[i], itemPath, dc.save, dc.modeSave);
    const auto [it, inserted] = seen.emplace(c.name, itemPath);
    if (!inserted)
      v.fail(childPath(itemPath, "name"),
             "collection \"" + c.name + "\" is already configured at " + it->second);
    dc.collections.push_back(std::move(c));
  }
  return dc;
}

Json debuggerToJson(const DebuggerConfig& debugger) {
  Json out = saveConfigToJson(debugger.save, Json::object());
  out["save_config"] = modeSaveConfigsToJson(debugger.modeSave);
  out["include_workers"] = debugger.includeWorkers;
  out["collections"] = Json::array();
  for (const CollectionConfig& c : debugger.collections) {
    Json item = saveConfigToJson(c.save, Json::object());
    item["name"] = c.name;
    if (!c.includeRegex.empty()) item["include_regex"] = c.includeRegex;
    item["reductions"] = c.reductions;
    item["save_raw_tensor"] = c.saveRawTensor;
    item["save_config"] = modeSaveConfigsToJson(c.modeSave);
    item["save_shape"] = c.saveShape;
    item["save_histogram"] = c.saveHistogram;
    out["collections"].push_back(std::move(item));
  }
  return out;
}

}  // namespace strata::config::detail
