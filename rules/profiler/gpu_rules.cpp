// LowGPUUtilization, GPUMemoryIncrease and BatchSize (smdebug low_gpu_utilization.py,
// gpu_memory_increase.py, batch_size.py). Each keeps one series per (node, GPU) in bounded
// memory: the last `window` values exactly (for the verdict) and the whole series as a
// stats::BoundedSeries (for the box plots in the report).
#include <algorithm>
#include <map>
#include <set>

#include "rules/builtin.h"
#include "rules/format.h"
#include "rules/profiler/metric_rule.h"
#include "rules/stats.h"

namespace strata::rules {
namespace {

struct GpuSeries {
  explicit GpuSeries(size_t window) : last(window) {}
  stats::RollingWindow last;
  stats::BoundedSeries all;
  void push(double v) {
    last.push(v);
    all.push(v);
  }
};

double q(const std::vector<double>& values, double quant) { return stats::quantile(values, quant); }

// ---------------------------------------------------------------------------------------------
class LowGpuUtilization final : public MetricRuleBase {
 public:
  LowGpuUtilization(const nlohmann::json& params, const BuiltinContext& ctx)
      : MetricRuleBase("LowGPUUtilization", false) {
    Params p(builtinDecl(name_), params);
    thresholdP95_ = p.number("threshold_p95");
    thresholdP5_ = p.number("threshold_p5");
    window_ = static_cast<size_t>(p.integer("window"));
    patience_ = p.integer("patience");
    finishParams(p, ctx.compat);
    report_.ruleParameters = p.joined({"threshold_p95", "threshold_p5", "window", "patience"});
  }

  std::optional<std::string> missingData() const override {
    if (series_.size() > 0) return std::nullopt;
    return std::string("no GPU utilisation samples (a CPU-only host, or NVML not available)");
  }

  std::vector<Finding> invokeForWindow(const MetricWindow& w) override {
    for (const SystemSample& s : *w.samples)
      if (s.kind == MetricKind::kGpuUtilization) series_.get(s.node, s.name, window_).push(s.value);
    std::vector<std::string> low, fluctuating;
    for (auto& e : series_.entries()) {
      report_.datapoints = e.value.all.count();
      if (e.value.all.count() <= patience_) continue;
      const std::vector<double> last = e.value.last.values();
      const double p95 = q(last, 0.95), p5 = q(last, 0.05);
      const std::string id = e.node + "/" + e.name;
      if (p95 < thresholdP95_) {
        low.push_back(id + " p95 " + fixed(p95) + "%");
      } else if (p95 > thresholdP95_ && p5 < thresholdP5_) {
        fluctuating.push_back(id + " p95 " + fixed(p95) + "% p5 " + fixed(p5) + "%");
      } else {
        continue;
      }
      ++report_.ruleTriggered;
      ++report_.violations;
      Violation& v = violations_[{e.node, e.name}];
      v.gpu95 = p95;
      v.gpu5 = p5;
      lastTimestamp_ = compat_ ? w.startUs : w.endUs;
    }
    if (low.empty() && fluctuating.empty()) return {};
    std::string msg;
    if (!low.empty())
      msg += c10::str(low.size(), " GPU(s) underutilised (p95 of the last ", window_,
                      " samples below ", num(thresholdP95_), "%): ", join(low));
    if (!fluctuating.empty())
      msg += c10::str(msg.empty() ? "" : "; ", fluctuating.size(),
                      " GPU(s) fluctuating (p95 above ", num(thresholdP95_), "% but p5 below ",
                      num(thresholdP5_), "%): ", join(fluctuating));
    std::vector<std::string> subjects;
    for (auto& s : low) subjects.push_back(s.substr(0, s.find(' ')));
    for (auto& s : fluctuating) subjects.push_back(s.substr(0, s.find(' ')));
    Finding f = finding(w, msg, subjects);
    f.details = {{"underutilized", low.size()}, {"fluctuating", fluctuating.size()}};
    return {f};
  }

 private:
  static std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (size_t i = 0; i < v.size() && i < 8; ++i) out += (i ? ", " : "") + v[i];
    if (v.size() > 8) out += ", ...";
    return out;
  }

  void addDetails(RuleReport& r) const override {
    for (const auto& [key, v] : violations_) {
      const GpuSeries* s = series_.find(key.first, key.second);
      const std::vector<double> sorted = s->all.sorted();
      nlohmann::json j = boxJson(sorted);
      j["gpu_max"] = s->all.max();
      j["gpu_95"] = v.gpu95;
      j["gpu_5"] = v.gpu5;
      r.details[key.first][key.second] = j;
    }
    if (!violations_.empty()) r.details["last_timestamp"] = lastTimestamp_;
  }

  struct Violation {
    double gpu95 = 0, gpu5 = 0;
  };
  double thresholdP95_, thresholdP5_;
  size_t window_;
  int64_t patience_;
  SeriesMap<GpuSeries> series_;
  std::map<std::pair<std::string, std::string>, Violation> violations_;
  int64_t lastTimestamp_ = 0;
};

// ---------------------------------------------------------------------------------------------
class GpuMemoryIncrease final : public MetricRuleBase {
 public:
  GpuMemoryIncrease(const nlohmann::json& params, const BuiltinContext& ctx)
      : MetricRuleBase("GPUMemoryIncrease", false) {
    Params p(builtinDecl(name_), params);
    increase_ = p.number("increase");
    patience_ = p.integer("patience");
    window_ = static_cast<size_t>(p.integer("window"));
    finishParams(p, ctx.compat);
    report_.ruleParameters = p.joined({"increase", "patience", "window"});
  }

  std::optional<std::string> missingData() const override {
    if (series_.size() > 0) return std::nullopt;
    return std::string("no GPU memory samples (a CPU-only host, or NVML not available)");
  }

  std::vector<Finding> invokeForWindow(const MetricWindow& w) override {
    std::map<std::string, double> fired;  // "node/gpu" -> largest increase this window
    for (const SystemSample& s : *w.samples) {
      if (s.kind != MetricKind::kGpuMemory) continue;
      GpuSeries& g = series_.get(s.node, s.name, 2 * window_ + 1);
      g.push(s.value);
      const int64_t n = g.all.count();
      report_.datapoints = n;
      double diff;
      if (!increase(g, n, &diff) || !(diff > increase_) || n <= patience_) continue;
      ++report_.violations;
      ++report_.ruleTriggered;
      Violation& v = violations_[{s.node, s.name}];
      v.increase = diff;
      lastTimestamp_ = compat_ ? w.startUs : w.endUs;
      double& best = fired[s.node + "/" + s.name];
      best = std::max(best, diff);
    }
    if (fired.empty()) return {};
    std::string list;
    std::vector<std::string> subjects;
    for (const auto& [id, diff] : fired) {
      list += (list.empty() ? "" : ", ") + id + " +" + fixed(diff) + " points";
      subjects.push_back(id);
    }
    Finding f = finding(w, c10::str("GPU memory utilisation rose by more than ", num(increase_),
                                    " percentage points (moving average over ", window_,
                                    " samples): ", list),
                        subjects);
    return {f};
  }

 private:
  // The moving-average increase for the newest value; false while too few values.
  bool increase(const GpuSeries& g, int64_t n, double* diff) const {
    const size_t w = window_;
    if (compat_) {
      // np.mean(values[-w:]) - np.mean(values[-w-1:-2]): the second slice holds w-1 values.
      if (n <= static_cast<int64_t>(w) + 1) return false;
      std::vector<double> a(w), b(w - 1);
      for (size_t i = 0; i < w; ++i) a[i] = g.last.fromBack(w - 1 - i);
      for (size_t i = 0; i + 1 < w; ++i) b[i] = g.last.fromBack(w - i);
      *diff = stats::mean(a) - stats::mean(b);
      return true;
    }
    // The last `window` values against the `window` values before them.
    if (n < 2 * static_cast<int64_t>(w)) return false;
    std::vector<double> a(w), b(w);
    for (size_t i = 0; i < w; ++i) {
      a[i] = g.last.fromBack(w - 1 - i);
      b[i] = g.last.fromBack(2 * w - 1 - i);
    }
    *diff = stats::mean(a) - stats::mean(b);
    return true;
  }

  void addDetails(RuleReport& r) const override {
    for (const auto& [key, v] : violations_) {
      const GpuSeries* s = series_.find(key.first, key.second);
      nlohmann::json j = boxJson(s->all.sorted(), /*withP05=*/true);
      j["increase"] = v.increase;
      j["gpu_max"] = s->all.max();
      r.details[key.first][key.second] = j;
    }
    if (!violations_.empty()) r.details["last_timestamp"] = lastTimestamp_;
  }

  struct Violation {
    double increase = 0;
  };
  double increase_;
  int64_t patience_;
  size_t window_;
  SeriesMap<GpuSeries> series_;
  std::map<std::pair<std::string, std::string>, Violation> violations_;
  int64_t lastTimestamp_ = 0;
};

// ---------------------------------------------------------------------------------------------
class BatchSize final : public MetricRuleBase {
 public:
  BatchSize(const nlohmann::json& params, const BuiltinContext& ctx) : MetricRuleBase("BatchSize", false) {
    Params p(builtinDecl(name_), params);
    cpuP95_ = p.number("cpu_threshold_p95");
    gpuP95_ = p.number("gpu_threshold_p95");
    memP95_ = p.number("gpu_memory_threshold_p95");
    patience_ = p.integer("patience");
    window_ = static_cast<size_t>(p.integer("window"));
    finishParams(p, ctx.compat);
    report_.ruleParameters = p.joined(
        {"cpu_threshold_p95", "gpu_threshold_p95", "gpu_memory_threshold_p95", "patience", "window"});
  }

  // Its verdict needs CPU, GPU utilisation and GPU memory together.
  std::optional<std::string> missingData() const override {
    if (util_.size() == 0 || memory_.size() == 0) return std::string("no GPU utilisation or memory samples (a CPU-only host, or NVML not available)");
    if (cpu_.size() == 0) return std::string("no CPU utilisation samples (the system monitor did not run)");
    return std::nullopt;
  }

  std::vector<Finding> invokeForWindow(const MetricWindow& w) override {
    if (compat_) {
      cpuCompat(w);
    } else {
      cpuDefault(w);
    }
    for (const SystemSample& s : *w.samples) {
      if (s.kind == MetricKind::kGpuMemory) memory_.get(s.node, s.name, window_).push(s.value);
      if (s.kind == MetricKind::kGpuUtilization) util_.get(s.node, s.name, window_).push(s.value);
    }
    std::vector<std::string> subjects;
    for (auto& node : cpu_.entries()) {
      const int64_t n = node.value.all.count();
      report_.datapoints = n;
      if (n <= static_cast<int64_t>(window_) || n <= patience_) continue;
      const double cpuP95 = q(node.value.last.values(), 0.95);
      if (!(cpuP95 < cpuP95_)) continue;
      for (auto& gpu : util_.entries()) {
        if (gpu.node != node.node || gpu.value.all.count() <= static_cast<int64_t>(window_)) continue;
        const GpuSeries* mem = memory_.find(gpu.node, gpu.name);
        if (mem == nullptr) continue;
        const double gpuP95 = q(gpu.value.last.values(), 0.95);
        const double memP95 = q(mem->last.values(), 0.95);
        if (!(gpuP95 < gpuP95_ && memP95 < memP95_)) continue;
        ++report_.ruleTriggered;
        ++report_.violations;
        flagged_.insert({gpu.node, gpu.name});
        subjects.push_back(gpu.node + "/" + gpu.name + " (GPU p95 " + fixed(gpuP95) +
                           "%, memory p95 " + fixed(memP95) + "%, CPU p95 " + fixed(cpuP95) + "%)");
      }
    }
    if (subjects.empty()) return {};
    std::string list;
    for (size_t i = 0; i < subjects.size() && i < 8; ++i) list += (i ? ", " : "") + subjects[i];
    std::vector<std::string> ids;
    for (const auto& s : subjects) ids.push_back(s.substr(0, s.find(' ')));
    return {finding(w,
                    c10::str("CPU, GPU and GPU memory all below their p95 thresholds (",
                             num(cpuP95_), "%, ", num(gpuP95_), "%, ", num(memP95_),
                             "%): the batch size could grow, or a smaller instance would do: ", list),
                    ids)};
  }

 private:
  // The reference: per window and node, the i-th value of every core summed, divided by the
  // number of cores seen in the window (batch_size.py).
  void cpuCompat(const MetricWindow& w) {
    std::map<std::string, SeriesMap<std::vector<double>>> cores;
    std::vector<std::string> order;
    for (const SystemSample& s : *w.samples) {
      if (s.kind != MetricKind::kCpuUtilization) continue;
      if (!cores.count(s.node)) order.push_back(s.node);
      cores[s.node].get(s.node, s.name).push_back(s.value);
    }
    for (const std::string& node : order) {
      auto& byCore = cores[node].entries();
      size_t len = byCore.front().value.size();
      for (auto& c : byCore) len = std::min(len, c.value.size());
      CpuSeries& series = cpu_.get(node, "cpu", window_);
      for (size_t i = 0; i < len; ++i) {
        double total = 0;
        for (auto& c : byCore) total += c.value[i];
        series.push(total / static_cast<double>(byCore.size()));
      }
    }
  }

  // Default: the mean over the cores of each snapshot (samples within 20 ms on one node).
  void cpuDefault(const MetricWindow& w) {
    for (const SystemSample& s : *w.samples) {
      if (s.kind != MetricKind::kCpuUtilization) continue;
      Snapshot& snap = open_[s.node];
      if (snap.n > 0 && std::llabs(s.timestampUs - snap.startUs) > kSnapshotWindowUs) {
        cpu_.get(s.node, "cpu", window_).push(snap.sum / snap.n);
        snap = Snapshot{};
      }
      if (snap.n == 0) snap.startUs = s.timestampUs;
      snap.sum += s.value;
      ++snap.n;
    }
    // A snapshot is complete at the end of the window unless it straddles the boundary.
    for (auto& [node, snap] : open_) {
      if (snap.n > 0 && w.endUs - snap.startUs > kSnapshotWindowUs) {
        cpu_.get(node, "cpu", window_).push(snap.sum / snap.n);
        snap = Snapshot{};
      }
    }
  }

  void addDetails(RuleReport& r) const override {
    std::set<std::string> nodes;
    for (const auto& key : flagged_) {
      const GpuSeries* util = util_.find(key.first, key.second);
      const GpuSeries* mem = memory_.find(key.first, key.second);
      const CpuSeries* cpu = cpu_.find(key.first, "cpu");
      if (!nodes.count(key.first) && cpu != nullptr) {
        r.details[key.first]["cpu"] = boxJson(cpu->all.sorted());
        nodes.insert(key.first);
      }
      const std::vector<double> us = util->all.sorted();
      r.details[key.first][key.second] = boxJson(us);
      const std::vector<double> ms = mem->all.sorted();
      nlohmann::json mj = boxJson(ms);
      if (compat_) {
        // batch_size.py computes the memory IQR from the utilisation p25.
        const stats::BoxStats u = stats::boxStats(us), m = stats::boxStats(ms);
        const double iqr = m.p75 - u.p25;
        mj["upper"] = std::min(m.p75 + 1.5 * iqr, m.max);
        mj["lower"] = std::max(m.p25 - 1.5 * iqr, m.min);
      }
      r.details[key.first][key.second + "_memory"] = mj;
    }
  }

  using CpuSeries = GpuSeries;
  struct Snapshot {
    int64_t startUs = 0;
    double sum = 0;
    int n = 0;
  };
  double cpuP95_, gpuP95_, memP95_;
  int64_t patience_;
  size_t window_;
  SeriesMap<CpuSeries> cpu_;  // (node, "cpu")
  SeriesMap<GpuSeries> util_, memory_;
  std::map<std::string, Snapshot> open_;
  std::set<std::pair<std::string, std::string>> flagged_;
};

}  // namespace

std::unique_ptr<Rule> makeLowGpuUtilization(const nlohmann::json& p, const BuiltinContext& c) {
  return std::make_unique<LowGpuUtilization>(p, c);
}
std::unique_ptr<Rule> makeGpuMemoryIncrease(const nlohmann::json& p, const BuiltinContext& c) {
  return std::make_unique<GpuMemoryIncrease>(p, c);
}
std::unique_ptr<Rule> makeBatchSize(const nlohmann::json& p, const BuiltinContext& c) {
  return std::make_unique<BatchSize>(p, c);
}

}  // namespace strata::rules
