// LoadBalancing (smdebug load_balancing.py), fixed and extended.
//
// GPU part: a histogram of each GPU's utilisation, and the Jensen-Shannon distance between every
// pair of GPUs (within and across nodes); a pair above `threshold` is a violation once both GPUs
// have more than `patience` samples. Compat mode reproduces the reference, which can never fire
// (its pair loop compares only the last GPU with itself) and whose bins (np.arange(0, 100, 2))
// drop values above 98.
//
// Rank part (default mode only): from framework events, each rank's mean step time, compute time
// per step (forward, backward and optimizer events; without them, step time minus blocked time)
// and the share of the step not spent computing (waiting on communication, pipeline peers or
// data). Fires when the spread across ranks exceeds `threshold`:
//   step    (max - min) / max of the mean step time
//   compute (max - min) / max of compute per step
//   wait    max - min of the non-compute share
// once every compared rank has at least kMinRankSteps steps. It also records a per-rank heatmap of
// step time over time for the report. With per-layer slices in the timeline (a pipeline stage's
// layers: Forward-/Backward-SubModuleInternal) the finding names the slow rank's slowest layer,
// the one to move or split, with its forward and backward time per step.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "rules/builtin.h"
#include "rules/format.h"
#include "rules/profiler/metric_rule.h"
#include "rules/stats.h"

namespace strata::rules {
namespace {

// Steps a rank needs before its means are compared: fewer are dominated by warm-up.
constexpr int64_t kMinRankSteps = 20;
// Heatmap columns; when the run outgrows them, neighbouring columns are merged.
constexpr size_t kHeatmapColumns = 120;

struct LayerTime {
  double forwardUs = 0, backwardUs = 0;  // summed over the timeline
  double totalUs() const { return forwardUs + backwardUs; }
};

// The layer with the most forward + backward time (the first name on a tie); nullptr if none.
const std::pair<const std::string, LayerTime>* slowestLayer(const std::map<std::string, LayerTime>& layers) {
  const std::pair<const std::string, LayerTime>* best = nullptr;
  for (const auto& item : layers)
    if (best == nullptr || item.second.totalUs() > best->second.totalUs()) best = &item;
  return best;
}

struct RankStats {
  int64_t steps = 0;
  double stepUs = 0;
  double byClass[kNumEventClasses] = {0};  // EventClass -> µs
  double computeUs = 0;                   // top-level compute events
  int64_t timelineSteps = 0;              // distinct steps those events belong to
  int64_t lastTimelineStep = -1;
  std::set<int> stages;  // pipeline stages its compute events name (args.stage)
  std::map<std::string, LayerTime> layers;  // per-layer slices, by layer name
  // Heatmap: per column, sum and count of step durations.
  std::vector<double> colSum;
  std::vector<int64_t> colCount;
};

class LoadBalancing final : public MetricRuleBase {
 public:
  LoadBalancing(const nlohmann::json& params, const BuiltinContext& ctx)
      : MetricRuleBase("LoadBalancing", false) {
    Params p(builtinDecl(name_), params);
    compat_ = p.boolean("compat", ctx.compat);
    // SageMaker's rulesconfig exposes 0.5; the Nov-2020 code used 0.2 (specs/smdebug.md §3.0).
    threshold_ = p.number("threshold", compat_ ? nlohmann::json(0.2) : nlohmann::json(0.5));
    patience_ = p.integer("patience");
    finishParams(p, ctx.compat);
    report_.ruleParameters = p.joined({"threshold", "patience"});
    edges_ = compat_ ? stats::arange(0, 100, 2) : stats::arange(0, 102, 2);  // 0..100 when fixed
  }

  // It compares GPUs with each other, or (default mode) ranks with each other.
  std::optional<std::string> missingData() const override {
    if (gpus_.size() > 0 || (!compat_ && rankViews().size() >= 2)) return std::nullopt;
    if (compat_) return std::string("no GPU utilisation samples (a CPU-only host, or NVML not available)");
    return c10::str("no GPU utilisation samples, and fewer than two ranks with ", kMinRankSteps,
                    " steps in the framework timeline (a single-rank run, or the timeline was off)");
  }

  std::vector<Finding> invokeForWindow(const MetricWindow& w) override {
    for (const SystemSample& s : *w.samples) {
      if (s.kind != MetricKind::kGpuUtilization) continue;
      Gpu& g = gpus_.get(s.node, s.name);
      if (g.counts.empty()) g.counts.assign(edges_.size() - 1, 0);
      ++g.n;
      gpuDatapoints_ = g.n;  // the reference: the last GPU's sample count
      report_.datapoints = gpuDatapoints_ + rankSteps_;
      const int bin = stats::histogramBin(s.value, edges_);
      if (bin >= 0) ++g.counts[static_cast<size_t>(bin)];
    }
    std::vector<Finding> out;
    if (!compat_) {
      if (auto f = gpuPairs(w)) out.push_back(*f);
      for (const FrameworkEvent& e : *w.events) addEvent(e);
      if (auto f = rankImbalance(w)) out.push_back(*f);
    }
    return out;
  }

 private:
  struct Gpu {
    int64_t n = 0;
    std::vector<int64_t> counts;
  };

  std::optional<Finding> gpuPairs(const MetricWindow& w) {
    auto& all = gpus_.entries();
    std::vector<std::string> pairs;
    for (size_t i = 0; i < all.size(); ++i) {
      for (size_t j = i + 1; j < all.size(); ++j) {
        if (all[i].value.n <= patience_ || all[j].value.n <= patience_) continue;
        const double d = stats::jensenShannonDistance(all[i].value.counts, all[j].value.counts);
        if (!(d > threshold_)) continue;
        ++report_.violations;
        ++report_.ruleTriggered;
        const std::string a = all[i].node + "/" + all[i].name, b = all[j].node + "/" + all[j].name;
        distances_[all[i].node][all[i].name][all[j].node == all[i].node ? all[j].name : b] = d;
        pairs.push_back(a + " vs " + b + " " + fixed(d, 2));
      }
    }
    if (pairs.empty()) return std::nullopt;
    std::string list;
    for (size_t k = 0; k < pairs.size() && k < 6; ++k) list += (k ? ", " : "") + pairs[k];
    if (pairs.size() > 6) list += ", ...";
    return finding(w, c10::str(pairs.size(), " GPU pair(s) have utilisation distributions further apart than ",
                               num(threshold_), " (Jensen-Shannon distance): ", list));
  }

  void addEvent(const FrameworkEvent& e) {
    if (e.rank < 0) return;
    RankStats& r = ranks_[e.rank];
    const EventClass c = classifyEvent(e);
    const double dur = static_cast<double>(e.durationUs());
    if (c == EventClass::kStep) {
      ++r.steps;
      ++rankSteps_;  // default mode: the ranks' steps are datapoints too
      report_.datapoints = gpuDatapoints_ + rankSteps_;
      r.stepUs += dur;
      if (heatStartUs_ < 0) heatStartUs_ = e.startUs;
      size_t col = static_cast<size_t>(std::max<int64_t>(0, e.startUs - heatStartUs_) / heatColUs_);
      while (col >= kHeatmapColumns) {
        mergeColumns();
        col = static_cast<size_t>(std::max<int64_t>(0, e.startUs - heatStartUs_) / heatColUs_);
      }
      if (r.colSum.size() <= col) {
        r.colSum.resize(col + 1, 0);
        r.colCount.resize(col + 1, 0);
      }
      r.colSum[col] += dur / 1e6;
      ++r.colCount[col];
    } else {
      if (e.phase == "Forward-SubModuleInternal") r.layers[e.name].forwardUs += dur;
      if (e.phase == "Backward-SubModuleInternal") r.layers[e.name].backwardUs += dur;
      r.byClass[static_cast<int>(c)] += dur;
      if (isTopLevelCompute(e, c)) r.computeUs += dur;
      if (c == EventClass::kForward || c == EventClass::kBackward)
        if (const std::string* s = e.arg("stage")) {
          try {
            r.stages.insert(std::stoi(*s));
          } catch (const std::exception&) {
          }
        }
      // The detailed timeline may cover fewer steps than the step timer: per-step compute and
      // waiting divide by the steps the timeline covers.
      if (e.step >= 0 && e.step != r.lastTimelineStep) {
        ++r.timelineSteps;
        r.lastTimelineStep = e.step;
      }
    }
  }

  void mergeColumns() {
    for (auto& [rank, r] : ranks_) {
      std::vector<double> s((r.colSum.size() + 1) / 2, 0);
      std::vector<int64_t> c(s.size(), 0);
      for (size_t i = 0; i < r.colSum.size(); ++i) {
        s[i / 2] += r.colSum[i];
        c[i / 2] += r.colCount[i];
      }
      r.colSum = std::move(s);
      r.colCount = std::move(c);
    }
    heatColUs_ *= 2;
  }

  struct RankView {
    int rank;
    double stepS, computeS, waitShare;
  };

  std::vector<RankView> rankViews() const {
    std::vector<RankView> v;
    for (const auto& [rank, r] : ranks_) {
      if (r.steps < kMinRankSteps || r.stepUs <= 0) continue;
      const double stepMean = r.stepUs / r.steps;
      const double blocked = r.byClass[static_cast<int>(EventClass::kWait)] +
                             r.byClass[static_cast<int>(EventClass::kData)];
      const double covered = r.timelineSteps > 0 ? static_cast<double>(r.timelineSteps) : static_cast<double>(r.steps);
      const double computePerStep =
          std::min(stepMean, r.computeUs > 0 ? r.computeUs / covered : std::max(0.0, stepMean - blocked / covered));
      v.push_back({rank, stepMean / 1e6, computePerStep / 1e6, 1 - computePerStep / stepMean});
    }
    return v;
  }

  // "rank 3", or "rank 0, stage 0" when the rank ran pipeline stages.
  std::string label(int rank) const {
    std::string out = "rank " + std::to_string(rank);
    auto it = ranks_.find(rank);
    if (it == ranks_.end() || it->second.stages.empty()) return out;
    out += it->second.stages.size() == 1 ? ", stage " : ", stages ";
    size_t i = 0;
    for (int s : it->second.stages) out += (i++ ? "," : "") + std::to_string(s);
    return out;
  }

  std::optional<Finding> rankImbalance(const MetricWindow& w) {
    const std::vector<RankView> v = rankViews();
    if (v.size() < 2) return std::nullopt;
    auto spread = [&](auto get, int* argmax, int* argmin) {
      double hi = -1, lo = 1e300;
      for (const RankView& r : v) {
        const double x = get(r);
        if (x > hi) { hi = x; *argmax = r.rank; }
        if (x < lo) { lo = x; *argmin = r.rank; }
      }
      return std::make_pair(hi, lo);
    };
    int maxStep = 0, minStep = 0, maxComp = 0, minComp = 0, maxWait = 0, minWait = 0;
    const auto [stepHi, stepLo] = spread([](const RankView& r) { return r.stepS; }, &maxStep, &minStep);
    const auto [compHi, compLo] = spread([](const RankView& r) { return r.computeS; }, &maxComp, &minComp);
    const auto [waitHi, waitLo] = spread([](const RankView& r) { return r.waitShare; }, &maxWait, &minWait);
    lastImbalance_ = {{"step", stepHi > 0 ? (stepHi - stepLo) / stepHi : 0},
                      {"compute", compHi > 0 ? (compHi - compLo) / compHi : 0},
                      {"wait", waitHi - waitLo}};
    std::vector<std::string> parts, subjects;
    if (stepHi > 0 && (stepHi - stepLo) / stepHi > threshold_) {
      parts.push_back(c10::str("step time ranges from ", fixed(stepLo, 3), " s (", label(minStep), ") to ",
                               fixed(stepHi, 3), " s (", label(maxStep), ")"));
      subjects.push_back("rank " + std::to_string(maxStep));
    }
    if (compHi > 0 && (compHi - compLo) / compHi > threshold_) {
      parts.push_back(c10::str("compute per step ranges from ", fixed(compLo, 3), " s (", label(minComp), ") to ",
                               fixed(compHi, 3), " s (", label(maxComp), ")"));
      subjects.push_back("rank " + std::to_string(maxComp));
    }
    if (waitHi - waitLo > threshold_) {
      parts.push_back(c10::str(label(maxWait), " spends ", fixed(waitHi * 100, 0),
                               "% of each step not computing (waiting), ", label(minWait), " ", fixed(waitLo * 100, 0),
                               "%"));
      subjects.push_back("rank " + std::to_string(maxWait));
    }
    if (parts.empty()) return std::nullopt;
    ++report_.violations;
    ++report_.ruleTriggered;
    ++rankTriggers_;
    // Name the slow one: the rank (or stage) computing the most per step, else the slowest step.
    const bool byCompute = compHi > 0 && (compHi - compLo) / compHi > threshold_;
    const int slow = byCompute ? maxComp : maxStep;
    const bool stage = ranks_.at(slow).stages.size() > 0;
    std::string msg = (stage ? label(slow) + " is the slow stage" : "rank " + std::to_string(slow) + " is the slow rank") +
                      "; load imbalance across " + std::to_string(v.size()) + " ranks: ";
    for (size_t i = 0; i < parts.size(); ++i) msg += (i ? "; " : "") + parts[i];
    msg += " (threshold " + num(threshold_) + ")";
    const RankStats& slowStats = ranks_.at(slow);
    const auto* layer = slowestLayer(slowStats.layers);
    nlohmann::json layerDetails;
    if (layer != nullptr) {
      const double steps = std::max<int64_t>(1, slowStats.timelineSteps);
      const double perStepMs = layer->second.totalUs() / steps / 1e3;
      msg += c10::str("; its slowest layer is ", layer->first, " (forward ",
                      fixed(layer->second.forwardUs / steps / 1e3, 1), " ms + backward ",
                      fixed(layer->second.backwardUs / steps / 1e3, 1), " ms per step");
      if (slowStats.computeUs > 0)
        msg += c10::str(", ", fixed(100 * layer->second.totalUs() / slowStats.computeUs, 0), "% of its compute");
      msg += ")";
      layerDetails = {{"name", layer->first},
                      {"forward_ms_per_step", layer->second.forwardUs / steps / 1e3},
                      {"backward_ms_per_step", layer->second.backwardUs / steps / 1e3},
                      {"ms_per_step", perStepMs}};
    }
    Finding f = finding(w, msg, subjects);
    f.details = lastImbalance_;
    f.details["slow_rank"] = slow;
    if (!layerDetails.is_null()) f.details["slow_layer"] = layerDetails;
    if (stage) f.details["slow_stages"] = std::vector<int>(ranks_.at(slow).stages.begin(), ranks_.at(slow).stages.end());
    return f;
  }

  void addDetails(RuleReport& r) const override {
    for (const auto& g : gpus_.entries()) r.details[g.node]["workloads"][g.name] = g.value.counts;
    for (const auto& [node, d] : distances_) r.details[node]["distances"] = d;
    if (compat_ || ranks_.empty()) return;
    nlohmann::json ranks = nlohmann::json::object();
    for (const auto& [rank, s] : ranks_) {
      nlohmann::json j = {{"steps", s.steps}, {"step_s", s.stepUs / 1e6}, {"compute_s", s.computeUs / 1e6},
                          {"timeline_steps", s.timelineSteps > 0 ? s.timelineSteps : s.steps}};
      if (!s.stages.empty()) j["stages"] = std::vector<int>(s.stages.begin(), s.stages.end());
      if (const auto* layer = slowestLayer(s.layers)) j["slowest_layer"] = layer->first;
      for (int c = 1; c < kNumEventClasses; ++c)
        j[std::string(eventClassName(static_cast<EventClass>(c))) + "_s"] = s.byClass[c] / 1e6;
      ranks[std::to_string(rank)] = j;
    }
    r.details["ranks"] = ranks;
    if (!lastImbalance_.is_null()) r.details["imbalance"] = lastImbalance_;
    r.details["rank_triggers"] = rankTriggers_;
    nlohmann::json heat = {{"start_us", heatStartUs_}, {"bucket_us", heatColUs_}};
    nlohmann::json rows = nlohmann::json::array(), names = nlohmann::json::array();
    for (const auto& [rank, s] : ranks_) {
      names.push_back(rank);
      nlohmann::json row = nlohmann::json::array();
      for (size_t i = 0; i < s.colSum.size(); ++i)
        row.push_back(s.colCount[i] > 0 ? nlohmann::json(s.colSum[i] / s.colCount[i]) : nlohmann::json());
      rows.push_back(row);
    }
    heat["ranks"] = names;
    heat["step_mean_s"] = rows;
    r.details["heatmap"] = heat;
  }

  double threshold_;
  int64_t patience_;
  std::vector<double> edges_;
  SeriesMap<Gpu> gpus_;
  std::map<std::string, nlohmann::json> distances_;
  std::map<int, RankStats> ranks_;
  int64_t gpuDatapoints_ = 0, rankSteps_ = 0;
  nlohmann::json lastImbalance_;
  int64_t rankTriggers_ = 0;
  int64_t heatStartUs_ = -1;
  int64_t heatColUs_ = 60000000;
};

}  // namespace

std::unique_ptr<Rule> makeLoadBalancing(const nlohmann::json& p, const BuiltinContext& c) {
  return std::make_unique<LoadBalancing>(p, c);
}

}  // namespace strata::rules
