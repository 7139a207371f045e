#include "rules/memory_sources.h"

#include <algorithm>
#include <cmath>

namespace strata::rules {

StepInfo& MemoryTrial::stepInfo(int64_t step, Mode mode, int64_t modeStep, double wall) {
  auto it = steps_.find(step);
  if (it == steps_.end()) {
    StepInfo s;
    s.step = step;
    s.mode = mode;
    s.modeStep = modeStep >= 0 ? modeStep : step;
    s.wallTimeSec = wall;
    it = steps_.emplace(step, s).first;
  } else if (!std::isnan(wall)) {
    it->second.wallTimeSec = wall;
  }
  return it->second;
}

void MemoryTrial::add(int64_t step, const std::string& name, TensorValue value, Mode mode, int64_t modeStep,
                      double wallTimeSec) {
  stepInfo(step, mode, modeStep, wallTimeSec);
  data_.putValue(name, step, std::move(value));
  names_.insert(name);
}

void MemoryTrial::addScalar(int64_t step, const std::string& name, double v, Mode mode, int64_t modeStep) {
  add(step, name, TensorValue{{1}, {v}}, mode, modeStep);
}

void MemoryTrial::addReduction(int64_t step, const std::string& name, const std::string& op, bool abs, double v,
                               Mode mode) {
  stepInfo(step, mode, -1, std::numeric_limits<double>::quiet_NaN());
  data_.putReduction(name, step, op, abs, v);
  names_.insert(name);
}

void MemoryTrial::setCollection(const std::string& collection, std::vector<std::string> tensors) {
  collections_[collection] = std::move(tensors);
}

std::vector<std::string> MemoryTrial::collections() const {
  std::vector<std::string> out;
  for (const auto& kv : collections_) out.push_back(kv.first);
  return out;
}

std::vector<std::string> MemoryTrial::tensorNames(const std::string& collection) const {
  if (collection.empty()) return {names_.begin(), names_.end()};
  auto it = collections_.find(collection);
  if (it == collections_.end()) return {};
  return it->second;
}

std::vector<StepInfo> MemoryTrial::steps() const {
  std::vector<StepInfo> out;
  for (const auto& kv : steps_) out.push_back(kv.second);
  return out;
}

std::optional<double> MemoryTrial::lastUpdateSec() const {
  if (lastUpdate_) return lastUpdate_;
  double best = std::numeric_limits<double>::quiet_NaN();
  for (const auto& kv : steps_)
    if (!std::isnan(kv.second.wallTimeSec) && !(kv.second.wallTimeSec <= best)) best = kv.second.wallTimeSec;
  if (std::isnan(best)) return std::nullopt;
  return best;
}

void VectorMetricSource::push(SystemSample s) {
  watermark_ = std::max(watermark_, s.timestampUs);
  samples_.push_back(std::move(s));
}

void VectorMetricSource::push(FrameworkEvent e) {
  watermark_ = std::max(watermark_, e.startUs);
  events_.push_back(std::move(e));
}

bool VectorMetricSource::poll(MetricBatch& out, size_t maxItems) {
  size_t n = 0;
  while (n < maxItems && (nextSample_ < samples_.size() || nextEvent_ < events_.size())) {
    const bool takeSample =
        nextEvent_ >= events_.size() ||
        (nextSample_ < samples_.size() && samples_[nextSample_].timestampUs <= events_[nextEvent_].startUs);
    if (takeSample) {
      out.samples.push_back(samples_[nextSample_++]);
    } else {
      out.events.push_back(events_[nextEvent_++]);
    }
    ++n;
  }
  return n > 0;
}

int64_t VectorMetricSource::watermarkUs() const {
  int64_t w = watermark_;
  if (nextSample_ < samples_.size()) w = std::min(w, samples_[nextSample_].timestampUs);
  if (nextEvent_ < events_.size()) w = std::min(w, events_[nextEvent_].startUs);
  return w;
}

SystemSample makeSample(int64_t timestampUs, const std::string& node, const std::string& dimension,
                        const std::string& name, double value) {
  SystemSample s;
  s.timestampUs = timestampUs;
  s.node = node;
  s.dimension = dimension;
  s.name = name;
  s.value = value;
  s.kind = classifyMetric(dimension, name);
  return s;
}

}  // namespace strata::rules
