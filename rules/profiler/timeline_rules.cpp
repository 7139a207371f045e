// MaxInitializationTime, StepOutlier and Dataloader (smdebug max_initialization_time.py,
// step_outlier.py, dataloader.py): the rules over framework (timeline) events.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "rules/builtin.h"
#include "rules/format.h"
#include "rules/profiler/metric_rule.h"
#include "rules/stats.h"

namespace strata::rules {
namespace {

// ---------------------------------------------------------------------------------------------
// MaxInitializationTime: the training loop (first step event) must start within `threshold`
// minutes of the job start. The reference compares the *start* of the current window with the
// first window and only fires while no step has been seen; inside ProfilerReport its clock never
// advances, so it never fires there (compat reproduces both). Default mode uses the end of the
// window, and also fires once when the first step arrives later than the threshold.
class MaxInitializationTime final : public MetricRuleBase {
 public:
  MaxInitializationTime(const nlohmann::json& params, const BuiltinContext& ctx)
      : MetricRuleBase("MaxInitializationTime", false), inReport_(ctx.inProfilerReport) {
    Params p(builtinDecl(name_), params);
    threshold_ = p.number("threshold");
    finishParams(p, ctx.compat);
    report_.ruleParameters = p.joined({"threshold"});
    report_.details["step_num"] = nlohmann::json::object();
  }

  std::optional<std::string> missingData() const override {
    if (jobStartUs_ != std::numeric_limits<int64_t>::max() || fwStartUs_ != std::numeric_limits<int64_t>::max())
      return std::nullopt;
    return std::string("no system samples or framework events to date the job's start and its first step");
  }

  std::vector<Finding> invokeForWindow(const MetricWindow& w) override {
    if (firstWindowUs_ < 0) firstWindowUs_ = w.startUs;
    for (const SystemSample& s : *w.samples) {
      jobStartUs_ = std::min(jobStartUs_, s.timestampUs);
      jobEndUs_ = std::max(jobEndUs_, s.timestampUs);
    }
    for (const FrameworkEvent& e : *w.events) {
      fwStartUs_ = std::min(fwStartUs_, e.startUs);
      fwEndUs_ = std::max(fwEndUs_, e.endUs);
      const bool step = compat_ ? e.name.find("Step:ModeKeys") != std::string::npos : isStepEvent(e);
      if (!step) continue;
      ++report_.datapoints;
      if (firstStepUs_ < 0) {
        firstStepUs_ = e.startUs;
      } else {
        lastStepUs_ = compat_ ? e.startUs : std::max(lastStepUs_, e.startUs);
      }
    }
    const double limitUs = threshold_ * 60e6;
    if (compat_) {
      const int64_t clock = inReport_ ? firstWindowUs_ : w.startUs;
      if (static_cast<double>(clock - firstWindowUs_) > limitUs && firstStepUs_ < 0) return fire(w, -1);
      return {};
    }
    const int64_t start = jobStart();
    if (firstStepUs_ < 0) {
      if (static_cast<double>(w.endUs - start) > limitUs) return fire(w, -1);
    } else if (!lateFirstStepReported_ && static_cast<double>(firstStepUs_ - start) > limitUs) {
      lateFirstStepReported_ = true;
      return fire(w, firstStepUs_ - start);
    }
    return {};
  }

 private:
  int64_t jobStart() const {
    int64_t s = std::min(jobStartUs_, fwStartUs_);
    return s == std::numeric_limits<int64_t>::max() ? firstWindowUs_ : std::min(s, firstWindowUs_);
  }

  std::vector<Finding> fire(const MetricWindow& w, int64_t delayUs) {
    ++report_.violations;
    ++report_.ruleTriggered;
    if (delayUs >= 0)
      return {finding(w, c10::str("the first training step started ", fixed(delayUs / 60e6),
                                  " minutes after the job started (threshold ", num(threshold_), " minutes)"))};
    return {finding(w, c10::str("no training step after ", fixed((w.endUs - (compat_ ? firstWindowUs_ : jobStart())) / 60e6),
                                " minutes of initialisation (threshold ", num(threshold_), " minutes)"))};
  }

  void addDetails(RuleReport& r) const override {
    if (jobStartUs_ != std::numeric_limits<int64_t>::max()) {
      r.details["job_start"] = static_cast<double>(jobStartUs_) / 1e6;
      r.details["job_end"] = static_cast<double>(jobEndUs_) / 1e6;
    }
    if (firstStepUs_ >= 0) r.details["step_num"]["first"] = firstStepUs_;
    if (lastStepUs_ >= 0) r.details["step_num"]["last"] = lastStepUs_;
    if (!compat_ && fwStartUs_ != std::numeric_limits<int64_t>::max()) {
      r.details["framework_start"] = static_cast<double>(fwStartUs_) / 1e6;
      r.details["framework_end"] = static_cast<double>(fwEndUs_) / 1e6;
    }
  }

  double threshold_;
  bool inReport_;
  int64_t firstWindowUs_ = -1;
  int64_t jobStartUs_ = std::numeric_limits<int64_t>::max(), jobEndUs_ = 0;
  int64_t fwStartUs_ = std::numeric_limits<int64_t>::max(), fwEndUs_ = 0;
  int64_t firstStepUs_ = -1, lastStepUs_ = -1;
  bool lateFirstStepReported_ = false;
};

// ---------------------------------------------------------------------------------------------
// StepOutlier: step durations above mean + stddev * std (population std) of their series, one
// series per (node, step phase) with more than 100 steps; fires when more than n_outliers.
// The reference adds the outlier count to Violations again in every window and counts window-
// boundary events twice; default mode counts each outlier once.
constexpr size_t kMinOutlierSeries = 100;  // step_outlier.py: len(values) > 100
constexpr size_t kStepSeriesCapacity = size_t{1} << 18;

struct StepSeries {
  std::vector<double> dur;  // s
  std::vector<int64_t> step;
  int64_t stride = 1, since = 0, count = 0;
  int64_t outliers = 0;  // as of the last evaluation
  double threshold = 0;
  void push(double d, int64_t s) {
    ++count;
    if (++since < stride) return;
    since = 0;
    dur.push_back(d);
    step.push_back(s);
    if (dur.size() >= kStepSeriesCapacity) {
      size_t j = 0;
      for (size_t i = 1; i < dur.size(); i += 2, ++j) {
        dur[j] = dur[i];
        step[j] = step[i];
      }
      dur.resize(j);
      step.resize(j);
      stride *= 2;
    }
  }
};

class StepOutlier final : public MetricRuleBase {
 public:
  StepOutlier(const nlohmann::json& params, const BuiltinContext& ctx) : MetricRuleBase("StepOutlier", false) {
    Params p(builtinDecl(name_), params);
    stddev_ = p.number("stddev");
    mode_ = p.optionalString("mode");
    nOutliers_ = p.integer("n_outliers");
    finishParams(p, ctx.compat);
    // The reference writes stddev under "threshold" too (step_outlier.py).
    report_.ruleParameters = "threshold:" + p.repr("stddev") + "\n" +
                             p.joined({"mode", "n_outliers", "stddev"});
    report_.details["step_details"] = nlohmann::json::object();
  }

  std::optional<std::string> missingData() const override {
    if (series_.size() > 0) return std::nullopt;
    return std::string("no step durations (the profiler's step timer or the timeline's Step events)");
  }

  std::vector<Finding> invokeForWindow(const MetricWindow& w) override {
    std::map<std::string, std::map<int64_t, std::pair<int64_t, int64_t>>> intervals;  // node -> step -> span
    for (const FrameworkEvent& e : *w.events) {
      const bool step = compat_ ? e.name.find("Step:ModeKeys") != std::string::npos : isStepEvent(e);
      if (!step && !(mode_ && e.name == *mode_)) continue;
      ++report_.datapoints;
      const std::string node = eventNodeKey(e);
      series_.get(node, e.name).push(static_cast<double>(e.endUs - e.startUs) / 1e6, e.step);
      intervals[node].emplace(e.step, std::make_pair(e.startUs, e.endUs));
    }
    std::vector<std::string> subjects;
    int64_t windowOutliers = 0;
    for (auto& s : series_.entries()) {
      StepSeries& ss = s.value;
      if (ss.dur.size() <= kMinOutlierSeries) continue;
      const double mean = stats::mean(ss.dur), sd = stats::pstd(ss.dur);
      ss.threshold = mean + sd * stddev_;
      int64_t n = 0;
      for (double d : ss.dur) n += d > ss.threshold;
      ss.outliers = n * ss.stride;
      lastSeries_[s.node] = s.name;
      if (ss.outliers <= nOutliers_) continue;
      ++report_.ruleTriggered;
      if (compat_) report_.violations += ss.outliers;
      windowOutliers += ss.outliers;
      subjects.push_back(s.node);
      // What ran during this window's outlier steps.
      auto iv = intervals.find(s.node);
      if (iv == intervals.end()) continue;
      for (size_t i = 0; i < ss.dur.size(); ++i) {
        if (!(ss.dur[i] > ss.threshold)) continue;
        auto span = iv->second.find(ss.step[i]);
        if (span == iv->second.end()) continue;
        for (const FrameworkEvent& e : *w.events)
          if (!(e.endUs < span->second.first || span->second.second < e.startUs)) breakdown_.add(e);
      }
    }
    if (!compat_) {
      int64_t total = 0;
      for (const auto& s : series_.entries())
        if (s.value.outliers > nOutliers_) total += s.value.outliers;
      report_.violations = total;
    }
    if (subjects.empty()) return {};
    return {finding(w, c10::str(windowOutliers, " step(s) took longer than mean + ", num(stddev_),
                                " std of their series on ", subjects.size(), " node(s) (more than ",
                                nOutliers_, " outliers allowed)"),
                    subjects)};
  }

 private:
  void addDetails(RuleReport& r) const override {
    nlohmann::json& all = r.details["step_details"];
    for (const auto& [node, name] : lastSeries_) {
      const StepSeries& ss = *series_.find(node, name);
      std::vector<double> sorted = ss.dur;
      std::sort(sorted.begin(), sorted.end());
      nlohmann::json d;
      d["step_stats"] = {{"mean", stats::mean(ss.dur)},          {"max", sorted.back()},
                         {"p99", stats::quantileSorted(sorted, 0.99)}, {"p95", stats::quantileSorted(sorted, 0.95)},
                         {"p50", stats::quantileSorted(sorted, 0.50)}, {"min", sorted.front()}};
      d["number_of_outliers"] = ss.outliers;
      d["phase"] = name;
      d["stddev"] = std::round(stats::pstd(ss.dur) * 100) / 100;
      std::vector<double> normal, outlierDur;
      nlohmann::json steps = nlohmann::json::array();
      for (size_t i = 0; i < ss.dur.size(); ++i) {
        if (ss.dur[i] < ss.threshold) normal.push_back(ss.dur[i]);
        if (ss.dur[i] > ss.threshold) {
          outlierDur.push_back(ss.dur[i]);
          steps.push_back(ss.step[i]);
        }
      }
      std::vector<int64_t> probs;
      std::vector<double> edges;
      stats::histogramAuto(normal, 100, &probs, &edges);
      d["probs"] = probs;
      d["binedges"] = edges;
      if (steps.size() > kMaxDetailEntries) {
        nlohmann::json tail = nlohmann::json::array();
        for (size_t i = steps.size() - kMaxDetailEntries; i < steps.size(); ++i) tail.push_back(steps[i]);
        steps = tail;
      }
      d["step_numbers"] = steps;
      if (!compat_) {
        d["threshold_s"] = ss.threshold;
        d["outlier_durations_s"] = outlierDur.size() > 200 ? std::vector<double>(outlierDur.end() - 200, outlierDur.end())
                                                          : outlierDur;
        d["count"] = ss.count;
      }
      all[node] = d;
    }
    if (!breakdown_.empty()) breakdown_.toDetails(r.details, compat_);
  }

  double stddev_;
  std::optional<std::string> mode_;
  int64_t nOutliers_;
  SeriesMap<StepSeries> series_;
  std::map<std::string, std::string> lastSeries_;  // node -> phase shown in details (last wins)
  FrameworkBreakdown breakdown_;
};

// ---------------------------------------------------------------------------------------------
// Dataloader: the median number of data-loading processes running per second against the cores
// (min_threshold..max_threshold % of them). Default mode counts processes per host (the ranks
// of one host pooled: each rank's loader is its own process, and the ranks share the host's
// cores) against the cores of a host; the reference pools all nodes.
// Strata addition (default mode): the share of each step a rank spends waiting for its next
// batch (DataLoaderIter slices, which end where the step begins), which catches a slow loader
// whatever the number of loader processes: it fires when a rank's mean wait is more than
// `wait_threshold` % of mean wait + mean step, over at least kMinWaitSamples of each so far.
constexpr size_t kMaxParallelSamples = 1000;  // dataloader.py resets its list beyond this
constexpr int64_t kMinWaitSamples = 10;

// Pure: the % of a step spent waiting for data, from the mean wait and the mean step time.
double dataWaitPercent(double meanWaitUs, double meanStepUs) {
  const double total = meanWaitUs + meanStepUs;
  return total > 0 ? 100.0 * meanWaitUs / total : 0.0;
}

class Dataloader final : public MetricRuleBase {
 public:
  Dataloader(const nlohmann::json& params, const BuiltinContext& ctx) : MetricRuleBase("Dataloader", false) {
    Params p(builtinDecl(name_), params);
    min_ = p.number("min_threshold");
    max_ = p.number("max_threshold");
    patience_ = p.integer("patience");
    waitThreshold_ = p.number("wait_threshold");
    finishParams(p, ctx.compat);
    report_.ruleParameters = p.joined({"min_threshold", "max_threshold"});
  }

  std::optional<std::string> missingData() const override {
    if (report_.datapoints > 0) return std::nullopt;
    return std::string("no data-loader events (DataLoaderIter slices: the framework timeline was off, or the loop "
                       "does not use strata::DistributedSampler)");
  }

  std::vector<Finding> invokeForWindow(const MetricWindow& w) override {
    if (cores_ == 0) {
      std::map<std::string, std::set<std::string>> perNode;
      std::set<std::string> names;
      for (const SystemSample& s : *w.samples) {
        if (s.kind != MetricKind::kCpuUtilization) continue;
        names.insert(s.name);
        perNode[s.node].insert(s.name);
      }
      if (compat_) {
        cores_ = static_cast<int>(names.size());
      } else {
        for (const auto& kv : perNode) cores_ = std::max(cores_, static_cast<int>(kv.second.size()));
      }
    }
    std::map<std::pair<std::string, int64_t>, std::set<int64_t>> perSecond;  // (host, s) -> pids
    bool any = false;
    for (const FrameworkEvent& e : *w.events) {
      if (!any && parallel_.size() > kMaxParallelSamples) parallel_.clear();
      if (e.phase == "DataLoaderIterInitialize") {
        if (const std::string* v = e.arg("pin_memory")) pinMemory_ = *v;
        if (const std::string* v = e.arg("num_workers")) numWorkers_ = *v;
      }
      if (e.phase == "DataLoaderWorker" || e.phase == "DataLoaderIter") {
        any = true;
        ++report_.datapoints;
        loadTime_.push(static_cast<double>(e.endUs - e.startUs) / 1e6);
        const std::string host = compat_ ? std::string() : eventHostKey(e);
        auto& pids = perSecond[{host, e.startUs / 1000000}];
        if (e.pid >= 0) pids.insert(e.pid);
        prefetch_ = nullptr;
      }
      if (e.name.find("Prefetch") != std::string::npos) prefetch_ = true;
      if (!compat_) {
        if (e.phase == "DataLoaderIter") {
          WaitStats& r = wait_[eventNodeKey(e)];
          r.waitUs += static_cast<double>(e.durationUs());
          ++r.waits;
        } else if (isStepEvent(e) && !isEvaluationStep(e)) {
          // Training steps only: the loader feeds the training loop, and an evaluation pass's
          // steps (recorded as EVAL/PREDICT steps, often far longer) would dilute its wait.
          WaitStats& r = wait_[eventNodeKey(e)];
          r.stepUs += static_cast<double>(e.durationUs());
          ++r.steps;
        }
      }
    }
    const std::string waitMsg = compat_ ? std::string() : dataWaitMessage();
    if (perSecond.empty()) {
      if (waitMsg.empty()) return {};
      report_.ruleTriggered = 1;
      return {finding(w, waitMsg)};
    }
    for (const auto& kv : perSecond) parallel_.push_back(static_cast<double>(kv.second.size()));
    median_ = static_cast<int64_t>(stats::median(parallel_));
    const bool enough = static_cast<int64_t>(parallel_.size()) > patience_;
    std::string msg;
    if (enough && median_ < cores_ * (min_ / 100)) {
      ++report_.violations;
      msg = c10::str("a median of ", median_, " data-loading process(es) ran in parallel on ", cores_,
                     " cores (below ", num(min_), "% of the cores): data loading may starve the GPUs");
    }
    if (enough && median_ > cores_ * (max_ / 100)) {
      ++report_.violations;
      msg = c10::str("a median of ", median_, " data-loading processes ran in parallel on ", cores_,
                     " cores (above ", num(max_), "% of the cores): they compete for the CPUs");
    }
    if (!waitMsg.empty()) msg = msg.empty() ? waitMsg : msg + "; " + waitMsg;
    if (report_.violations > 0) report_.ruleTriggered = 1;
    if (msg.empty()) return {};
    return {finding(w, msg)};
  }

 private:
  struct WaitStats {
    double waitUs = 0, stepUs = 0;
    int64_t waits = 0, steps = 0;
  };

  // The rank waiting longest for data, when above wait_threshold (counted as a violation).
  std::string dataWaitMessage() {
    const std::string* worst = nullptr;
    double worstPercent = -1;
    for (const auto& [key, r] : wait_) {
      if (r.waits < kMinWaitSamples || r.steps < kMinWaitSamples) continue;
      const double percent = dataWaitPercent(r.waitUs / r.waits, r.stepUs / r.steps);
      if (percent > worstPercent) {
        worstPercent = percent;
        worst = &key;
      }
    }
    if (worst == nullptr || worstPercent <= waitThreshold_) return "";
    ++report_.violations;
    const WaitStats& r = wait_.at(*worst);
    return c10::str(*worst, " waits for its next batch ", fixed(worstPercent), "% of each step (",
                    fixed(r.waitUs / r.waits / 1000), " ms loading, ", fixed(r.stepUs / r.steps / 1000),
                    " ms computing; threshold ", num(waitThreshold_), "%): the data loader is the bottleneck");
  }

  void addDetails(RuleReport& r) const override {
    for (const auto& [key, st] : wait_) {
      if (st.waits == 0 || st.steps == 0) continue;
      r.details["data_wait"][key] = {{"percent", dataWaitPercent(st.waitUs / st.waits, st.stepUs / st.steps)},
                                     {"wait_ms", st.waitUs / st.waits / 1000},
                                     {"step_ms", st.stepUs / st.steps / 1000},
                                     {"batches", st.waits}};
    }
    if (median_ < 0) return;
    if (!pinMemory_.empty()) r.details["pin_memory"] = pinMemory_ == "True" || pinMemory_ == "true" || pinMemory_ == "1";
    if (!numWorkers_.empty()) {
      try {
        r.details["num_workers"] = std::stoll(numWorkers_);
      } catch (...) {
        r.details["num_workers"] = numWorkers_;
      }
    }
    if (!prefetch_.is_null()) r.details["prefetch"] = prefetch_;
    r.details["cores"] = cores_;
    r.details["dataloaders"] = median_;
    if (loadTime_.empty()) return;
    const std::vector<double> sorted = loadTime_.sorted();
    nlohmann::json t = {{"p25", stats::quantileSorted(sorted, 0.25)},
                        {"p50", stats::quantileSorted(sorted, 0.50)},
                        {"p95", stats::quantileSorted(sorted, 0.95)}};
    std::vector<int64_t> probs;
    std::vector<double> edges;
    stats::histogramAuto(loadTime_.kept(), 100, &probs, &edges);
    t["probs"] = probs;
    t["binedges"] = edges;
    r.details["dataloading_time"] = t;
  }

  double min_, max_, waitThreshold_;
  int64_t patience_;
  std::map<std::string, WaitStats> wait_;  // per node key (rank), run so far
  int cores_ = 0;
  std::vector<double> parallel_;
  int64_t median_ = -1;
  std::string pinMemory_, numWorkers_;
  nlohmann::json prefetch_ = false;
  stats::BoundedSeries loadTime_;
};

}  // namespace

std::unique_ptr<Rule> makeMaxInitializationTime(const nlohmann::json& p, const BuiltinContext& c) {
  return std::make_unique<MaxInitializationTime>(p, c);
}
std::unique_ptr<Rule> makeStepOutlier(const nlohmann::json& p, const BuiltinContext& c) {
  return std::make_unique<StepOutlier>(p, c);
}
std::unique_ptr<Rule> makeDataloader(const nlohmann::json& p, const BuiltinContext& c) {
  return std::make_unique<Dataloader>(p, c);
}

}  // namespace strata::rules
