// CPUBottleneck and IOBottleneck (smdebug cpu_bottleneck.py / io_bottleneck.py): the share of
// system snapshots in which some GPU is nearly idle while some CPU core is saturated (CPU) or
// waiting on I/O (IO). Fires when that share, over the run so far, exceeds `threshold` % after
// more than `patience` snapshots.
//
// Default mode groups snapshots per node; compat groups them across nodes in arrival order
// (the reference ignores the node, so snapshots of different hosts interleave).
#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include "rules/builtin.h"
#include "rules/format.h"
#include "rules/profiler/metric_rule.h"
#include "rules/stats.h"

namespace strata::rules {
namespace {

struct SnapshotKey {
  std::string node;  // "" in compat
  int64_t tsUs;
  bool operator<(const SnapshotKey& o) const {
    return tsUs != o.tsUs ? tsUs < o.tsUs : node < o.node;
  }
};

class BottleneckRule final : public MetricRuleBase {
 public:
  BottleneckRule(std::string name, MetricKind highKind, const nlohmann::json& params,
                 const BuiltinContext& ctx)
      : MetricRuleBase(name, false), highKind_(highKind) {
    Params p(builtinDecl(name), params);
    const bool io = highKind == MetricKind::kIoWait;
    threshold_ = p.number("threshold");
    highThreshold_ = p.number(io ? "io_threshold" : "cpu_threshold");
    gpuThreshold_ = p.number("gpu_threshold");
    patience_ = p.integer("patience");
    finishParams(p, ctx.compat);
    report_.ruleParameters =
        io ? p.joined({"threshold", "io_threshold", "gpu_threshold", "patience"})
           : p.joined({"threshold", "cpu_threshold", "gpu_threshold", "patience"});
  }

  // A bottleneck is a GPU idling while the host is busy: without GPU samples there is none to find.
  std::optional<std::string> missingData() const override {
    if (!sawGpu_)
      return std::string("no GPU utilisation samples (a CPU-only host, or NVML not available): it looks for GPUs "
                         "below gpu_threshold while ") +
             (highKind_ == MetricKind::kIoWait ? "I/O wait is high" : "a CPU core is busy");
    if (!sawHigh_)
      return std::string("no ") + (highKind_ == MetricKind::kIoWait ? "I/O wait" : "CPU utilisation") +
             " samples (the system monitor did not run)";
    return std::nullopt;
  }

  std::vector<Finding> invokeForWindow(const MetricWindow& w) override {
    std::map<SnapshotKey, int> lowGpu, high;
    for (const SystemSample& s : *w.samples) {
      const std::string& node = compat_ ? kNoNode : s.node;
      auto it = snapshotTs_.find(node);
      if (it == snapshotTs_.end()) it = snapshotTs_.emplace(node, 0).first;
      if (std::llabs(it->second - s.timestampUs) > kSnapshotWindowUs) {
        it->second = s.timestampUs;
        ++datapoints_;
      }
      const SnapshotKey key{node, it->second};
      sawGpu_ |= s.kind == MetricKind::kGpuUtilization;
      sawHigh_ |= s.kind == highKind_;
      if (s.kind == MetricKind::kGpuUtilization && s.value < gpuThreshold_) {
        int& n = lowGpu[key];
        if (n == 0) ++lowGpuSnapshots_;
        ++n;
      } else if (s.kind == highKind_ && s.value > highThreshold_) {
        ++high[key];
      }
    }
    std::vector<int64_t> times;  // this window's bottleneck snapshots
    std::set<SnapshotKey> thisWindow;
    std::set<std::string> nodes;
    for (const auto& [key, nHigh] : high) {
      auto g = lowGpu.find(key);
      if (g == lowGpu.end()) continue;
      thisWindow.insert(key);
      times.push_back(key.tsUs);
      if (!node(key).empty()) nodes.insert(key.node);
      // A snapshot repeated on a window boundary (compat's inclusive ends) is one bottleneck.
      if (!previousWindow_.count(key)) {
        ++bottlenecks_;
        recent_.push_back({key, g->second, nHigh});
        if (recent_.size() > kMaxDetailEntries) recent_.pop_front();
      }
    }
    previousWindow_ = std::move(thisWindow);

    report_.violations = bottlenecks_;
    report_.datapoints = datapoints_;
    if (datapoints_ <= patience_ ||
        static_cast<double>(bottlenecks_) / static_cast<double>(datapoints_) * 100 <= threshold_)
      return {};
    ++report_.ruleTriggered;
    aggregate(*w.events, times);
    const double pct = static_cast<double>(bottlenecks_) / static_cast<double>(datapoints_) * 100;
    const bool io = highKind_ == MetricKind::kIoWait;
    Finding f = finding(
        w, c10::str(bottlenecks_, " of ", datapoints_, " system snapshots (", fixed(pct),
                  "%) had a GPU below ", num(gpuThreshold_), "% utilisation while ",
                  io ? "a core waited on I/O more than " : "a CPU core was above ",
                  num(highThreshold_), "% (threshold ", num(threshold_),
                  "% of snapshots)"),
        std::vector<std::string>(nodes.begin(), nodes.end()));
    f.details = {{"bottlenecks", bottlenecks_}, {"datapoints", datapoints_}, {"percent", pct},
                 {"window_bottlenecks", times.size()}};
    return {f};
  }

 private:
  static const std::string& node(const SnapshotKey& k) { return k.node; }

  // Framework events running at each bottleneck snapshot (start < t < end), by a sweep over
  // events sorted by start.
  void aggregate(const std::vector<FrameworkEvent>& events, std::vector<int64_t> times) {
    if (events.empty() || times.empty()) return;
    std::sort(times.begin(), times.end());
    std::vector<const FrameworkEvent*> byStart;
    byStart.reserve(events.size());
    for (const auto& e : events) byStart.push_back(&e);
    std::stable_sort(byStart.begin(), byStart.end(),
                     [](const FrameworkEvent* a, const FrameworkEvent* b) { return a->startUs < b->startUs; });
    std::vector<const FrameworkEvent*> active;
    size_t next = 0;
    for (int64_t t : times) {
      while (next < byStart.size() && byStart[next]->startUs < t) active.push_back(byStart[next++]);
      active.erase(std::remove_if(active.begin(), active.end(),
                                  [t](const FrameworkEvent* e) { return e->endUs <= t; }),
                   active.end());
      for (const FrameworkEvent* e : active) breakdown_.add(*e);
    }
  }

  void addDetails(RuleReport& r) const override {
    nlohmann::json b = nlohmann::json::object();
    for (const auto& item : recent_) {
      std::string key = stats::pyFloat(static_cast<double>(item.key.tsUs) / 1e6);
      if (!item.key.node.empty()) key = item.key.node + " " + key;
      b[key] = {{"GPUs", item.gpus}, {"CPUs", item.cpus}};
    }
    r.details["bottlenecks"] = b;
    r.details["low_gpu_utilization"] = lowGpuSnapshots_;
    if (static_cast<size_t>(bottlenecks_) > recent_.size())
      r.details["bottlenecks_listed"] = recent_.size();
    if (!breakdown_.empty()) breakdown_.toDetails(r.details, compat_);
  }

  struct Recent {
    SnapshotKey key;
    int gpus, cpus;
  };
  static inline const std::string kNoNode;

  MetricKind highKind_;
  double threshold_, highThreshold_, gpuThreshold_;
  int64_t patience_;
  std::map<std::string, int64_t> snapshotTs_;  // per node ("" in compat): current snapshot start
  int64_t datapoints_ = 0;
  bool sawGpu_ = false, sawHigh_ = false;
  int64_t lowGpuSnapshots_ = 0;
  int64_t bottlenecks_ = 0;
  std::set<SnapshotKey> previousWindow_;
  std::deque<Recent> recent_;
  FrameworkBreakdown breakdown_;
};

}  // namespace

std::unique_ptr<Rule> makeCpuBottleneck(const nlohmann::json& p, const BuiltinContext& c) {
  return std::make_unique<BottleneckRule>("CPUBottleneck", MetricKind::kCpuUtilization, p, c);
}

std::unique_ptr<Rule> makeIoBottleneck(const nlohmann::json& p, const BuiltinContext& c) {
  return std::make_unique<BottleneckRule>("IOBottleneck", MetricKind::kIoWait, p, c);
}

}  // namespace strata::rules
