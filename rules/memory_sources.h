// In-memory data sources: a tensor trial built step by step, and a metric stream from vectors.
// For tests, benchmarks, and programs that feed the engine directly.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <string>
#include <vector>

#include "rules/sources.h"
#include "rules/tensor_store.h"

namespace strata::rules {

class MemoryTrial final : public InMemoryTrial {
 public:
  // Adds (or replaces) a tensor's value at a step. The step is created with `mode`/`modeStep`
  // on first use (modeStep defaults to the step).
  void add(int64_t step, const std::string& name, TensorValue value, Mode mode = Mode::kGlobal,
           int64_t modeStep = -1, double wallTimeSec = std::numeric_limits<double>::quiet_NaN());
  void addScalar(int64_t step, const std::string& name, double v, Mode mode = Mode::kGlobal, int64_t modeStep = -1);
  // Stores a reduction (as the hook's "smdebug/reductions/..." tensors) without a raw value.
  void addReduction(int64_t step, const std::string& name, const std::string& op, bool abs, double v,
                    Mode mode = Mode::kGlobal);
  void setCollection(const std::string& collection, std::vector<std::string> tensors);
  void setFinished(bool f = true) { finished_ = f; }
  void setLastUpdate(double sec) { lastUpdate_ = sec; }

  std::vector<std::string> collections() const override;
  std::vector<std::string> tensorNames(const std::string& collection = "") const override;
  std::vector<StepInfo> steps() const override;
  std::optional<double> lastUpdateSec() const override;
  bool finished() const override { return finished_; }

 private:
  StepInfo& stepInfo(int64_t step, Mode mode, int64_t modeStep, double wall);
  std::map<int64_t, StepInfo> steps_;
  std::set<std::string> names_;
  std::map<std::string, std::vector<std::string>> collections_;
  bool finished_ = false;
  std::optional<double> lastUpdate_;
};

// Owns a MemoryTrial; refresh() does nothing.
class MemoryTensorSource final : public TensorSource {
 public:
  MemoryTrial& mutableTrial() { return trial_; }
  void refresh() override {}
  const Trial& trial() const override { return trial_; }

 private:
  MemoryTrial trial_;
};

// Metric data pushed by the caller, each kind in time order. poll() merges the two streams by
// time; the watermark is the time of the next undelivered item, or the latest pushed (or set)
// time once everything is delivered. finished() once finish() was called and all was polled.
class VectorMetricSource final : public MetricSource {
 public:
  void push(SystemSample s);
  void push(FrameworkEvent e);
  void setWatermark(int64_t us) { watermark_ = us; }
  void finish() { ended_ = true; }
  void setFileStamps(std::optional<int64_t> first, std::optional<int64_t> latest) {
    first_ = first;
    latest_ = latest;
  }

  bool poll(MetricBatch& out, size_t maxItems) override;
  int64_t watermarkUs() const override;
  bool finished() const override { return ended_ && nextSample_ == samples_.size() && nextEvent_ == events_.size(); }
  std::optional<int64_t> firstFileStampUs() const override { return first_; }
  std::optional<int64_t> latestFileStampUs() const override { return latest_; }

 private:
  std::vector<SystemSample> samples_;
  std::vector<FrameworkEvent> events_;
  size_t nextSample_ = 0, nextEvent_ = 0;
  int64_t watermark_ = INT64_MIN;
  bool ended_ = false;
  std::optional<int64_t> first_, latest_;
};

// Convenience for tests and generators: a classified system sample.
SystemSample makeSample(int64_t timestampUs, const std::string& node, const std::string& dimension,
                        const std::string& name, double value);

}  // namespace strata::rules
