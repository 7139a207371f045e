// OverallSystemUsage and OverallFrameworkMetrics (smdebug overall_system_usage.py,
// overall_framework_metrics.py): summaries for the report; they never fire.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>

#include "rules/builtin.h"
#include "rules/profiler/metric_rule.h"
#include "rules/stats.h"

namespace strata::rules {
namespace {

// Time series for the report's plots: fixed-width time buckets (mean per bucket); when there are
// more than kMaxPoints buckets, neighbours merge and the width doubles.
class Downsampled {
 public:
  static constexpr size_t kMaxPoints = 400;
  void add(int64_t tUs, double v) {
    if (startUs_ < 0) startUs_ = tUs;
    int64_t b = std::max<int64_t>(0, tUs - startUs_) / widthUs_;
    while (b >= static_cast<int64_t>(kMaxPoints)) {
      merge();
      b = std::max<int64_t>(0, tUs - startUs_) / widthUs_;
    }
    if (sum_.size() <= static_cast<size_t>(b)) {
      sum_.resize(b + 1, 0);
      n_.resize(b + 1, 0);
    }
    sum_[b] += v;
    ++n_[b];
  }
  nlohmann::json toJson() const {
    nlohmann::json t = nlohmann::json::array(), v = nlohmann::json::array();
    for (size_t i = 0; i < sum_.size(); ++i) {
      if (n_[i] == 0) continue;
      t.push_back((static_cast<double>(startUs_) + (static_cast<double>(i) + 0.5) * widthUs_) / 1e6);
      v.push_back(sum_[i] / n_[i]);
    }
    return {{"t", t}, {"v", v}};
  }

 private:
  void merge() {
    std::vector<double> s((sum_.size() + 1) / 2, 0);
    std::vector<int64_t> n(s.size(), 0);
    for (size_t i = 0; i < sum_.size(); ++i) {
      s[i / 2] += sum_[i];
      n[i / 2] += n_[i];
    }
    sum_ = std::move(s);
    n_ = std::move(n);
    widthUs_ *= 2;
  }
  int64_t startUs_ = -1;
  int64_t widthUs_ = 1000000;
  std::vector<double> sum_;
  std::vector<int64_t> n_;
};

// The reference's metric order in the JSON.
enum Metric { kNetwork, kGpu, kCpu, kCpuMemory, kGpuMemory, kIo, kNumMetrics };
constexpr const char* kMetricNames[kNumMetrics] = {"Network", "GPU", "CPU", "CPU memory", "GPU memory", "I/O"};

// The metrics a sample counts toward (the reference tests each independently).
int metricsOf(const SystemSample& s, std::array<Metric, 2>* out) {
  int n = 0;
  if (s.kind == MetricKind::kGpuMemory) (*out)[n++] = kGpuMemory;
  if (s.kind == MetricKind::kGpuUtilization) (*out)[n++] = kGpu;
  if (s.name == "MemoryUsedPercent" && n < 2) (*out)[n++] = kCpuMemory;
  if (s.kind == MetricKind::kCpuUtilization && n < 2) (*out)[n++] = kCpu;
  if (s.dimension == "Algorithm" && n < 2) (*out)[n++] = kNetwork;
  if (s.kind == MetricKind::kIoWait && n < 2) (*out)[n++] = kIo;
  return n;
}

class OverallSystemUsage final : public MetricRuleBase {
 public:
  OverallSystemUsage(const nlohmann::json& params, const BuiltinContext& ctx)
      : MetricRuleBase("OverallSystemUsage", false) {
    readBaseParamsOnly(params, ctx.compat);
  }

  std::optional<std::string> missingData() const override {
    if (!nodes_.empty()) return std::nullopt;
    return std::string("no system samples (the system monitor did not run)");
  }

  std::vector<Finding> invokeForWindow(const MetricWindow& w) override {
    std::array<Metric, 2> ms;
    if (compat_) {
      // Sums per exact timestamp; a timestamp repeated on the window boundary adds to the same
      // sum (the reference's dict), so sums are kept one window before they become series.
      std::map<std::pair<int, std::string>, std::map<int64_t, double>> cur;
      for (const SystemSample& s : *w.samples) {
        if (s.kind == MetricKind::kGpuUtilization) gpuIds_.insert(s.name);
        if (s.kind == MetricKind::kCpuUtilization) coreIds_.insert(s.name);
        nodeOrder(s.node);
        const int n = metricsOf(s, &ms);
        for (int i = 0; i < n; ++i) cur[{ms[i], s.node}][s.timestampUs] += s.value;
      }
      for (auto& [key, sums] : pending_) {
        auto it = cur.find(key);
        for (auto& [ts, v] : sums) {
          if (it != cur.end()) {
            auto same = it->second.find(ts);
            if (same != it->second.end()) {
              v += same->second;
              it->second.erase(same);
            }
          }
          push(key.first, key.second, ts, v);
        }
      }
      pending_ = std::move(cur);
    } else {
      for (const SystemSample& s : *w.samples) {
        nodeOrder(s.node);
        const int n = metricsOf(s, &ms);
        if (n == 0) continue;
        Snapshot& snap = open_[s.node];
        if (snap.startUs >= 0 && std::llabs(s.timestampUs - snap.startUs) > kSnapshotWindowUs) close(s.node, snap);
        if (snap.startUs < 0) snap.startUs = s.timestampUs;
        for (int i = 0; i < n; ++i) {
          snap.sum[ms[i]] += s.value;
          ++snap.count[ms[i]];
        }
      }
      for (auto& [node, snap] : open_)
        if (snap.startUs >= 0 && w.endUs - snap.startUs > kSnapshotWindowUs) close(node, snap);
    }
    if (!nodes_.empty()) {
      const Series* first = series(kCpu, nodes_.front());
      report_.datapoints = first ? first->all.count() : 0;
      if (compat_) {
        auto it = pending_.find({kCpu, nodes_.front()});
        if (it != pending_.end()) report_.datapoints += static_cast<int64_t>(it->second.size());
      }
    }
    return {};
  }

 private:
  struct Series {
    stats::BoundedSeries all;
    Downsampled plot;
  };
  struct Snapshot {
    int64_t startUs = -1;
    double sum[kNumMetrics] = {0};
    int count[kNumMetrics] = {0};
  };

  void nodeOrder(const std::string& node) {
    if (std::find(nodes_.begin(), nodes_.end(), node) == nodes_.end()) nodes_.push_back(node);
  }
  const Series* series(int metric, const std::string& node) const {
    return series_.find(kMetricNames[metric], node);
  }
  void push(int metric, const std::string& node, int64_t tsUs, double v) {
    Series& s = series_.get(kMetricNames[metric], node);
    s.all.push(v);
    double shown = v;
    if (compat_ && (metric == kGpu || metric == kGpuMemory) && !gpuIds_.empty()) shown /= gpuIds_.size();
    if (compat_ && (metric == kCpu || metric == kIo) && !coreIds_.empty()) shown /= coreIds_.size();
    s.plot.add(tsUs, shown);
  }
  // Default mode: GPU, GPU memory, CPU and I/O are means over the devices in the snapshot;
  // host memory and network are sums.
  void close(const std::string& node, Snapshot& snap) {
    for (int m = 0; m < kNumMetrics; ++m) {
      if (snap.count[m] == 0) continue;
      const bool mean = m == kGpu || m == kGpuMemory || m == kCpu || m == kIo;
      push(m, node, snap.startUs, mean ? snap.sum[m] / snap.count[m] : snap.sum[m]);
    }
    snap = Snapshot{};
  }

  void addDetails(RuleReport& r) const override {
    for (int m = 0; m < kNumMetrics; ++m) {
      double n = 1;
      if (compat_ && (m == kGpu || m == kGpuMemory)) n = static_cast<double>(gpuIds_.size());
      if (compat_ && (m == kCpu || m == kIo)) n = static_cast<double>(coreIds_.size());
      nlohmann::json byNode = nlohmann::json::object();
      for (const std::string& node : nodes_) {
        const Series* s = series(m, node);
        std::vector<double> values = s ? s->all.kept() : std::vector<double>{};
        if (compat_) {
          auto it = pending_.find({m, node});
          if (it != pending_.end())
            for (const auto& kv : it->second) values.push_back(kv.second);
        }
        if (values.empty()) continue;
        std::sort(values.begin(), values.end());
        auto clamp = [&](double x) { x /= n; return x > 0 ? x : 0.0; };
        byNode[node] = {{"max", clamp(values.back())},
                        {"p99", clamp(stats::quantileSorted(values, 0.99))},
                        {"p95", clamp(stats::quantileSorted(values, 0.95))},
                        {"p50", clamp(stats::quantileSorted(values, 0.50))},
                        {"min", clamp(values.front())}};
      }
      if (!byNode.empty() || compat_) r.details[kMetricNames[m]] = byNode;
    }
    nlohmann::json ts = nlohmann::json::object();
    for (const auto& e : series_.entries()) ts[e.node][e.name] = e.value.plot.toJson();  // metric, node
    r.details["timeseries"] = ts;
    r.details["nodes"] = nodes_;
  }

  SeriesMap<Series> series_;  // (metric name, node)
  std::vector<std::string> nodes_;
  std::set<std::string> gpuIds_, coreIds_;
  std::map<std::pair<int, std::string>, std::map<int64_t, double>> pending_;
  std::map<std::string, Snapshot> open_;
};

// ---------------------------------------------------------------------------------------------
// OverallFrameworkMetrics: the reference breakdown, plus (Strata) per-rank time by activity and
// the layers that take the most forward+backward time.
constexpr size_t kTopLayers = 15;

class OverallFrameworkMetrics final : public MetricRuleBase {
 public:
  OverallFrameworkMetrics(const nlohmann::json& params, const BuiltinContext& ctx)
      : MetricRuleBase("OverallFrameworkMetrics", false) {
    readBaseParamsOnly(params, ctx.compat);
  }

  std::optional<std::string> missingData() const override {
    if (events_ > 0) return std::nullopt;
    return std::string("no framework events (the timeline's framework_profile window saw no step)");
  }

  std::vector<Finding> invokeForWindow(const MetricWindow& w) override {
    for (const FrameworkEvent& e : *w.events) {
      breakdown_.add(e);
      ++events_;
      if (!compat_) ++report_.datapoints;  // the reference never counts: its Datapoints stay 0
      const double dur = static_cast<double>(e.endUs - e.startUs);
      const std::string& phase = e.phase;
      if (containsNoCase(phase, "gpu") && !containsNoCase(phase, "cpu")) gpuCounts_ = static_cast<int>(breakdown_.gpu.size());
      if (!containsNoCase(phase, "cpu") && !containsNoCase(phase, "gpu") && phase.find("Step") != std::string::npos) {
        // overall_framework_metrics.py: "others" = (last end - first start) - sum(step_phases) / gpu_counts,
        // where the sum includes the previous "others" (compat keeps that).
        if (e.step >= 0 || !compat_) {
          if (startUs_ < 0) startUs_ = e.startUs;
          endUs_ = e.endUs;
        }
        if (compat_ && startUs_ >= 0) {
          double sum = others_;
          for (const auto& kv : breakdown_.stepPhases.items()) sum += kv.second;
          others_ = static_cast<double>(endUs_ - startUs_) - sum / gpuCounts_;
          haveOthers_ = true;
        }
      }
      if (e.rank >= 0) {
        RankSpan& r = ranks_[e.rank];
        r.first = r.first < 0 ? e.startUs : std::min(r.first, e.startUs);
        r.last = std::max(r.last, e.endUs);
        const EventClass c = classifyEvent(e);
        r.byClass[static_cast<int>(c)] += dur;
        if (isTopLevelCompute(e, c)) r.computeUs += dur;
      }
      const EventClass c = classifyEvent(e);
      if (c == EventClass::kForward || c == EventClass::kBackward) {
        // smdebug's hook nests per-module "*-SubModuleInternal" events in one top-module event;
        // Strata records one event per layer. Per-layer times are the nested ones when present.
        auto& map = e.phase.find("SubModuleInternal") != std::string::npos ? subLayers_ : layers_;
        auto& l = map[e.name];
        (c == EventClass::kForward ? l.first : l.second) += dur;
      }
    }
    return {};
  }

 private:
  struct RankSpan {
    int64_t first = -1, last = 0;
    double byClass[kNumEventClasses] = {0};
    double computeUs = 0;
  };

  void addDetails(RuleReport& r) const override {
    FrameworkBreakdown b = breakdown_;
    if (compat_) {
      if (haveOthers_) b.stepPhases["others"] = others_;
    } else if (!b.stepPhases.empty()) {
      double span = 0, steps = 0;
      for (const auto& [rank, s] : ranks_) {
        if (s.first >= 0) span += static_cast<double>(s.last - s.first);
        steps += s.byClass[static_cast<int>(EventClass::kStep)];
      }
      if (ranks_.empty()) span = static_cast<double>(endUs_ - startUs_), steps = b.stepPhases.total();
      b.stepPhases["others"] = std::max(0.0, span - steps);
    }
    b.toDetails(r.details, false);
    if (compat_) return;
    // Without smdebug's *-SubModuleInternal events, the split comes from the per-layer events.
    if (!r.details.contains("forward_backward")) {
      double f = 0, bw = 0;
      for (const auto& [rank, s] : ranks_) {
        f += s.byClass[static_cast<int>(EventClass::kForward)];
        bw += s.byClass[static_cast<int>(EventClass::kBackward)];
      }
      if (f + bw > 0) r.details["forward_backward"] = {{"Forward pass", f / (f + bw) * 100}, {"Backward pass", bw / (f + bw) * 100}};
    }
    nlohmann::json ranks = nlohmann::json::object();
    for (const auto& [rank, s] : ranks_) {
      nlohmann::json j = {{"span_s", s.first >= 0 ? static_cast<double>(s.last - s.first) / 1e6 : 0.0},
                          {"compute_s", s.computeUs / 1e6}};
      for (int c = 0; c < kNumEventClasses; ++c)
        j[std::string(eventClassName(static_cast<EventClass>(c))) + "_s"] = s.byClass[c] / 1e6;
      ranks[std::to_string(rank)] = j;
    }
    r.details["ranks"] = ranks;
    const auto& layers = subLayers_.empty() ? layers_ : subLayers_;
    std::vector<std::pair<double, std::string>> order;
    for (const auto& [name, fb] : layers) order.push_back({fb.first + fb.second, name});
    std::sort(order.rbegin(), order.rend());
    nlohmann::json top = nlohmann::json::array();
    for (size_t i = 0; i < order.size() && i < kTopLayers; ++i) {
      const auto& fb = layers.at(order[i].second);
      top.push_back({{"name", order[i].second}, {"forward_us", fb.first}, {"backward_us", fb.second}});
    }
    r.details["top_layers"] = top;
  }

  FrameworkBreakdown breakdown_;
  int64_t events_ = 0;
  int gpuCounts_ = 1;
  int64_t startUs_ = -1, endUs_ = 0;
  double others_ = 0;
  bool haveOthers_ = false;
  std::map<int, RankSpan> ranks_;
  std::map<std::string, std::pair<double, double>> layers_, subLayers_;  // name -> forward, backward µs
};

}  // namespace

std::unique_ptr<Rule> makeOverallSystemUsage(const nlohmann::json& p, const BuiltinContext& c) {
  return std::make_unique<OverallSystemUsage>(p, c);
}
std::unique_ptr<Rule> makeOverallFrameworkMetrics(const nlohmann::json& p, const BuiltinContext& c) {
  return std::make_unique<OverallFrameworkMetrics>(p, c);
}

}  // namespace strata::rules
