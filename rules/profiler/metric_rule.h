// Shared pieces of the profiler (metric) rules: the base class holding the reference report,
// and the framework-event breakdown the reference computes for bottlenecks and outliers
// (smdebug's utils.aggregate_framework_metrics).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rules/declarations.h"
#include "rules/params.h"
#include "strata/rules.h"

namespace strata::rules {

// The reference's "snapshot": system metrics within 20 ms belong to one sample of the host
// agent (cpu_bottleneck.py snapshot_window_seconds).
constexpr int64_t kSnapshotWindowUs = 20000;
// Detail lists that grow with the run (bottleneck timestamps, outlier steps) keep this many
// newest entries in the JSON; the counts stay exact.
constexpr size_t kMaxDetailEntries = 1000;

class MetricRuleBase : public Rule {
 public:
  MetricRuleBase(std::string name, bool compat) : name_(std::move(name)), compat_(compat) {}
  std::string name() const override { return name_; }
  Input input() const override { return Input::kMetrics; }
  std::optional<RuleReport> report() const override {
    RuleReport r = report_;
    addDetails(r);
    return r;
  }

 protected:
  // The end of every metric rule's parameter reads: the base class's scan_interval_us (the
  // engine schedules by it, see scanIntervalOf), compat (default: the engine's mode), and a
  // given key nothing read is an error.
  void finishParams(Params& p, bool engineCompat) {
    p.number(kScanIntervalParam.name);
    compat_ = p.boolean(kCompatParam.name, engineCompat);
    p.checkAllUsed();
  }
  // The whole parameter read of a rule with no parameters of its own: only the keys every
  // metric rule takes (finishParams), and nothing to list in its report.
  void readBaseParamsOnly(const nlohmann::json& params, bool engineCompat) {
    Params p(builtinDecl(name_), params);
    finishParams(p, engineCompat);
    report_.ruleParameters = "";
  }
  // Adds details computed lazily (quantiles over whole series) when a report is asked for.
  virtual void addDetails(RuleReport& /*r*/) const {}
  Finding finding(const MetricWindow& w, std::string message,
                  std::vector<std::string> subjects = {}) const {
    Finding f;
    f.rule = name_;
    f.message = std::move(message);
    f.timestampUs = w.endUs;
    f.subjects = std::move(subjects);
    return f;
  }

  std::string name_;
  bool compat_;
  RuleReport report_;
};

// Sums keyed by name, remembering first-insertion order (Python dict semantics).
class OrderedSums {
 public:
  double& operator[](const std::string& key);
  const std::vector<std::pair<std::string, double>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  double total() const;

 private:
  std::vector<std::pair<std::string, double>> items_;
  std::unordered_map<std::string, size_t> index_;
};

// The framework-event breakdown of the reference (time per CPU/GPU operator, per step phase,
// forward/backward, "general" phases, Horovod), accumulated over events, in µs.
class FrameworkBreakdown {
 public:
  void add(const FrameworkEvent& e);
  bool empty() const { return events_ == 0; }
  // Writes ratio, CPU, CPU_total, GPU, GPU_total, phase, phase_time, general,
  // forward_backward and horovod into `details`. `compatRatioBug`: pair the ratio labels (CPU
  // phases first) with the totals (GPU phases first) as utils.py does.
  void toDetails(nlohmann::json& details, bool compatRatioBug) const;

  std::vector<std::pair<std::string, OrderedSums>> cpu, gpu;  // phase -> operator -> µs
  OrderedSums stepPhases, forward, backward, general, horovod;

 private:
  static OrderedSums& phaseSums(std::vector<std::pair<std::string, OrderedSums>>& v,
                                const std::string& phase);
  int64_t events_ = 0;
};

// filter_events: operator -> % of the total across phases, keeping those above `threshold` %,
// renormalised; `times` gets their µs.
void filterOperators(const std::vector<std::pair<std::string, OrderedSums>>& byPhase,
                     double threshold, nlohmann::json* percents, nlohmann::json* times);

// Per-series state keyed by (node, name), iterated in first-seen order (Python dict order).
template <typename T>
class SeriesMap {
 public:
  struct Entry {
    std::string node, name;
    T value;
  };
  template <typename... Args>
  T& get(const std::string& node, const std::string& name, Args&&... init) {
    key_.assign(node);
    key_.push_back('\0');
    key_.append(name);
    auto it = index_.find(key_);
    if (it != index_.end()) return entries_[it->second].value;
    index_.emplace(key_, entries_.size());
    entries_.push_back(Entry{node, name, T(std::forward<Args>(init)...)});
    return entries_.back().value;
  }
  const T* find(const std::string& node, const std::string& name) const {
    auto it = index_.find(node + std::string(1, '\0') + name);
    return it == index_.end() ? nullptr : &entries_[it->second].value;
  }
  std::vector<Entry>& entries() { return entries_; }
  const std::vector<Entry>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> index_;
  std::string key_;
};

// Box-plot numbers of a whole series as the reference writes them (p25..p95, upper, lower).
nlohmann::json boxJson(const std::vector<double>& sorted, bool withP05 = false);

// Lower-case substring test.
bool containsNoCase(const std::string& haystack, const char* needle);

// What a framework event is, for the Strata-specific analyses (per-rank time breakdown, load
// balance, top layers). See docs/rules.md "Framework event vocabulary".
//   kComm: communication that may overlap compute (AllReduce buckets on the comm thread, sends);
//   kWait: time the compute thread is blocked (AllReduceWait, pipeline recv/idle, "wait").
enum class EventClass { kStep, kForward, kBackward, kOptimizer, kComm, kWait, kData, kOther };
constexpr int kNumEventClasses = 8;
// Compute events that are not nested in another compute event (smdebug's *-SubModuleInternal
// events nest inside the module's).
bool isTopLevelCompute(const FrameworkEvent& e, EventClass c);
EventClass classifyEvent(const FrameworkEvent& e);
const char* eventClassName(EventClass c);
bool isStepEvent(const FrameworkEvent& e);
// A step event of an EVAL or PREDICT step (Step:ModeKeys.EVAL / .PREDICT).
bool isEvaluationStep(const FrameworkEvent& e);

// A series key for framework events: the node id, or "rank-<r>" when the reader gives none.
std::string eventNodeKey(const FrameworkEvent& e);
// The host of a framework event, as system samples name it: the node id without its rank
// suffix ("algo-1-0" of rank 0 -> "algo-1"); eventNodeKey when it has none.
std::string eventHostKey(const FrameworkEvent& e);

}  // namespace strata::rules
