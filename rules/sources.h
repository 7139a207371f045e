// Where the rule engine's data comes from. The engine pulls; sources never call back.
// Implementations: rules::MemoryTensorSource / VectorMetricSource (memory_sources.h: tests,
// benchmarks, embedding), and the file adapters over the debugger's trial reader and the
// profiler's readers (rules/sources/).
// Threading: a source is used by the engine's thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "strata/rules.h"

namespace strata::rules {

// A tensor trial that grows while training runs.
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  // Looks for new steps (e.g. new index files). Cheap when nothing changed.
  virtual void refresh() = 0;
  // The trial as of the last refresh(); valid for the source's lifetime.
  virtual const Trial& trial() const = 0;
};

struct MetricBatch {
  std::vector<SystemSample> samples;
  std::vector<FrameworkEvent> events;
  size_t size() const { return samples.size() + events.size(); }
  void clear() {
    samples.clear();
    events.clear();
  }
};

// System samples and framework events, roughly in time order.
class MetricSource {
 public:
  virtual ~MetricSource() = default;
  // Appends up to about `maxItems` items that became available since the last call. Returns
  // false when there was nothing new.
  virtual bool poll(MetricBatch& out, size_t maxItems) = 0;
  // Every item with a timestamp (samples) or start (events) below this has been delivered.
  virtual int64_t watermarkUs() const = 0;
  // The job has ended and everything has been delivered.
  virtual bool finished() const = 0;
  // Compat mode: the reference's window origin (the first system file's name stamp) and the
  // last analysed instant (the minimum of the newest system and framework file stamps).
  virtual std::optional<int64_t> firstFileStampUs() const { return std::nullopt; }
  virtual std::optional<int64_t> latestFileStampUs() const { return std::nullopt; }
};

}  // namespace strata::rules
