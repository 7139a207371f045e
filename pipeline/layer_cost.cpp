#include "pipeline/layer_cost.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "core/errors.h"

namespace strata::pipeline {
namespace {

using nlohmann::json;

double readNonNegative(const json& obj, const char* key, const std::string& where) {
  if (!obj.contains(key)) return 0;
  const json& v = obj.at(key);
  if (!v.is_number()) STRATA_THROW(ConfigError, where, ": \"", key, "\" must be a number, got ", v.dump());
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < 0) STRATA_THROW(ConfigError, where, ": \"", key, "\" must be >= 0, got ", v.dump());
  return d;
}

size_t readBytes(const json& obj, const char* key, const std::string& where) {
  if (!obj.contains(key)) return 0;
  const json& v = obj.at(key);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    STRATA_THROW(ConfigError, where, ": \"", key, "\" must be a byte count (integer >= 0), got ", v.dump());
  return v.get<size_t>();
}

void rejectUnknown(const json& obj, const std::set<std::string>& known, const std::string& where) {
  for (const auto& item : obj.items())
    if (!known.count(item.key())) STRATA_THROW(ConfigError, where, ": unknown key \"", item.key(), "\"");
}

}  // namespace

double LayerCost::weightGradientOrDefault() const {
  if (weightGradientSeconds < 0) return backwardSeconds * kDefaultWeightGradientShare;
  return std::min(weightGradientSeconds, backwardSeconds);
}

void validateLink(const LinkModel& link) {
  if (!std::isfinite(link.latencySeconds) || link.latencySeconds < 0)
    STRATA_THROW(ConfigError, "link latency must be a finite number >= 0 seconds, got ", link.latencySeconds);
  if (!(link.bytesPerSecond > 0))
    STRATA_THROW(ConfigError, "link bandwidth must be > 0 bytes/s, got ", link.bytesPerSecond);
}

std::vector<LayerCost> layerProfileFromJson(const json& doc, const std::string& source) {
  if (!doc.is_object() || !doc.contains("layers") || !doc.at("layers").is_array())
    STRATA_THROW(ConfigError, source, ": a layer profile is an object with a \"layers\" array");
  rejectUnknown(doc, {"layers", "link"}, source);
  std::vector<LayerCost> layers;
  int index = 0;
  for (const json& item : doc.at("layers")) {
    const std::string where = c10::str(source, ": layers[", index, "]");
    if (!item.is_object()) STRATA_THROW(ConfigError, where, " must be an object, got ", item.dump());
    rejectUnknown(item,
                  {"name", "forward_ms", "backward_ms", "parameter_bytes", "gradient_bytes", "optimizer_state_bytes",
                   "activation_bytes", "stash_bytes", "tie_group", "tied_bytes", "weight_gradient_ms"},
                  where);
    if (!item.contains("name") || !item.at("name").is_string())
      STRATA_THROW(ConfigError, where, ": \"name\" (a string) is required");
    LayerCost layer;
    layer.name = item.at("name").get<std::string>();
    layer.forwardSeconds = readNonNegative(item, "forward_ms", where) / 1e3;
    layer.backwardSeconds = readNonNegative(item, "backward_ms", where) / 1e3;
    layer.parameterBytes = readBytes(item, "parameter_bytes", where);
    layer.gradientBytes = readBytes(item, "gradient_bytes", where);
    layer.optimizerStateBytes = readBytes(item, "optimizer_state_bytes", where);
    layer.activationBytes = readBytes(item, "activation_bytes", where);
    layer.stashBytes = readBytes(item, "stash_bytes", where);
    if (item.contains("tie_group")) {
      const json& t = item.at("tie_group");
      if (!t.is_number_integer() || t.get<int64_t>() < -1)
        STRATA_THROW(ConfigError, where, ": \"tie_group\" must be an integer >= -1, got ", t.dump());
      layer.tieGroup = t.get<int>();
    }
    layer.tiedBytes = readBytes(item, "tied_bytes", where);
    if (item.contains("weight_gradient_ms")) {
      layer.weightGradientSeconds = readNonNegative(item, "weight_gradient_ms", where) / 1e3;
      if (layer.weightGradientSeconds > layer.backwardSeconds)
        STRATA_THROW(ConfigError, where, ": \"weight_gradient_ms\" ", item.at("weight_gradient_ms").dump(),
                     " exceeds \"backward_ms\" ", layer.backwardSeconds * 1e3, " (W is part of the backward)");
    }
    if (layer.tiedBytes > layer.staticBytes())
      STRATA_THROW(ConfigError, where, ": \"tied_bytes\" ", layer.tiedBytes,
                   " exceeds the layer's parameter + gradient + optimizer state bytes ", layer.staticBytes());
    layers.push_back(std::move(layer));
    ++index;
  }
  if (layers.empty()) STRATA_THROW(ConfigError, source, ": \"layers\" is empty");
  return layers;
}

json layerProfileToJson(const std::vector<LayerCost>& layers) {
  json list = json::array();
  for (const LayerCost& l : layers) {
    json item = {{"name", l.name},
                 {"forward_ms", l.forwardSeconds * 1e3},
                 {"backward_ms", l.backwardSeconds * 1e3},
                 {"parameter_bytes", l.parameterBytes},
                 {"gradient_bytes", l.gradientBytes},
                 {"optimizer_state_bytes", l.optimizerStateBytes},
                 {"activation_bytes", l.activationBytes},
                 {"stash_bytes", l.stashBytes}};
    if (l.tieGroup >= 0) item["tie_group"] = l.tieGroup;
    if (l.tiedBytes > 0) item["tied_bytes"] = l.tiedBytes;
    if (l.weightGradientSeconds >= 0) item["weight_gradient_ms"] = l.weightGradientSeconds * 1e3;
    list.push_back(std::move(item));
  }
  return json{{"layers", list}};
}

LinkModel linkFromJson(const json& doc, const std::string& source, LinkModel fallback) {
  if (!doc.is_object() || !doc.contains("link")) return fallback;
  const json& link = doc.at("link");
  const std::string where = source + ": link";
  if (!link.is_object()) STRATA_THROW(ConfigError, where, " must be an object, got ", link.dump());
  rejectUnknown(link, {"latency_us", "bandwidth_gbps"}, where);
  LinkModel out = fallback;
  if (link.contains("latency_us")) out.latencySeconds = readNonNegative(link, "latency_us", where) / 1e6;
  if (link.contains("bandwidth_gbps")) {
    const double gbps = readNonNegative(link, "bandwidth_gbps", where);
    if (gbps <= 0) STRATA_THROW(ConfigError, where, ": \"bandwidth_gbps\" must be > 0, got ", gbps);
    out.bytesPerSecond = gbps * 1e9 / 8;
  }
  return out;
}

json linkToJson(const LinkModel& link) {
  json out = {{"latency_us", link.latencySeconds * 1e6}};
  if (std::isfinite(link.bytesPerSecond)) out["bandwidth_gbps"] = link.bytesPerSecond * 8 / 1e9;
  return out;
}

std::vector<LayerCost> readLayerProfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) STRATA_THROW(ConfigError, "cannot read layer profile \"", path, "\": ", std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  json doc;
  try {
    doc = json::parse(text.str());
  } catch (const json::parse_error& e) {
    STRATA_THROW(ConfigError, path, ": not valid JSON: ", e.what());
  }
  return layerProfileFromJson(doc, path);
}

void writeLayerProfile(const std::string& path, const std::vector<LayerCost>& layers) {
  std::ofstream out(path);
  if (!out) STRATA_THROW(ConfigError, "cannot write layer profile \"", path, "\": ", std::strerror(errno));
  out << layerProfileToJson(layers).dump(2) << "\n";
  if (!out) STRATA_THROW(ConfigError, "cannot write layer profile \"", path, "\": ", std::strerror(errno));
}

std::vector<LayerCost> uniformLayers(int count, double forwardSeconds, double backwardSeconds,
                                     size_t activationBytes, size_t parameterBytes) {
  if (count < 1) STRATA_THROW(ConfigError, "uniform layers: count must be >= 1, got ", count);
  std::vector<LayerCost> layers(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    LayerCost& l = layers[static_cast<size_t>(i)];
    l.name = c10::str("layer", i);
    l.forwardSeconds = forwardSeconds;
    l.backwardSeconds = backwardSeconds;
    l.activationBytes = activationBytes;
    l.stashBytes = activationBytes;
    l.parameterBytes = parameterBytes;
    l.gradientBytes = parameterBytes;
  }
  return layers;
}

}  // namespace strata::pipeline
