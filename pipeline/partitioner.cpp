#include "pipeline/partitioner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "core/errors.h"
#include "core/named_values.h"
#include "pipeline/plan.h"

namespace strata::pipeline {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The bytes a set of layers holds twice or more because of ties: for every tie group, the
// tiedBytes of each of its layers in [first, end) except the first one.
class TieDedup {
 public:
  explicit TieDedup(const std::vector<LayerCost>& layers) : layers_(layers) {
    for (size_t i = 0; i < layers.size(); ++i)
      if (layers[i].tieGroup >= 0) members_[layers[i].tieGroup].push_back(static_cast<int>(i));
  }
  // Layers of `ranges` (half-open [first, end) pairs) that repeat a tied tensor.
  size_t duplicateBytes(const std::vector<std::pair<int, int>>& ranges) const {
    size_t bytes = 0;
    for (const auto& [group, members] : members_) {
      bool seen = false;
      for (int i : members)
        for (const auto& [first, end] : ranges)
          if (i >= first && i < end) {
            if (seen) bytes += layers_[static_cast<size_t>(i)].tiedBytes;
            seen = true;
          }
    }
    return bytes;
  }
  bool empty() const { return members_.empty(); }

 private:
  const std::vector<LayerCost>& layers_;
  std::map<int, std::vector<int>> members_;  // tie group -> layers, ascending
};

// Stage costs from prefix sums, so the DP and evaluateBounds compute bit-identical numbers.
class StageCalc {
 public:
  StageCalc(const std::vector<LayerCost>& layers, const PartitionOptions& options, int stages)
      : layers_(layers), options_(options), stages_(stages), ties_(layers) {
    const size_t n = layers.size();
    fwd_.assign(n + 1, 0);
    bwd_.assign(n + 1, 0);
    weight_.assign(n + 1, 0);
    static_.assign(n + 1, 0);
    stash_.assign(n + 1, 0);
    grad_.assign(n + 1, 0);
    for (size_t i = 0; i < n; ++i) {
      fwd_[i + 1] = fwd_[i] + layers[i].forwardSeconds;
      bwd_[i + 1] = bwd_[i] + layers[i].backwardSeconds;
      weight_[i + 1] = weight_[i] + layers[i].weightGradientOrDefault();
      static_[i + 1] = static_[i] + layers[i].staticBytes();
      stash_[i + 1] = stash_[i] + layers[i].stashBytes;
      grad_[i + 1] = grad_[i] + layers[i].gradientBytes;
    }
    // The weighted objective's normalisers: the whole model's time and memory.
    totalSeconds_ = fwd_[n] + bwd_[n];
    totalBytes_ = static_cast<double>(static_[n] + stash_[n]);
  }

  StagePlan stage(int k, int first, int end) const {
    StagePlan s;
    s.firstLayer = first;
    s.endLayer = end;
    s.forwardSeconds = fwd_[idx(end)] - fwd_[idx(first)];
    s.backwardSeconds = bwd_[idx(end)] - bwd_[idx(first)];
    s.weightGradientSeconds = weight_[idx(end)] - weight_[idx(first)];
    s.outputBytes = layers_[idx(end - 1)].activationBytes;
    s.sendSeconds = k + 1 < stages_ ? options_.link.transferSeconds(s.outputBytes) : 0;
    s.timeSeconds = s.forwardSeconds + s.backwardSeconds + (options_.includeSendCost ? s.sendSeconds : 0);
    s.staticBytes = static_[idx(end)] - static_[idx(first)];
    if (!ties_.empty()) s.staticBytes -= ties_.duplicateBytes({{first, end}});
    s.stashBytes = stash_[idx(end)] - stash_[idx(first)];
    s.gradientBytes = grad_[idx(end)] - grad_[idx(first)];
    s.inFlight = options_.inFlight.empty() ? 1 : options_.inFlight[idx(k)];
    s.memoryBytes = s.staticBytes + static_cast<size_t>(s.inFlight) * s.stashBytes;
    if (options_.memoryWeight) {
      const double w = *options_.memoryWeight;
      const double memory = totalBytes_ > 0 ? static_cast<double>(s.memoryBytes) / totalBytes_ : 0;
      const double time = totalSeconds_ > 0 ? s.timeSeconds / totalSeconds_ : 0;
      s.cost = w * memory + (1 - w) * time;
    }
    return s;
  }

  bool fitsCap(const StagePlan& s) const {
    return !options_.memoryCapBytes || s.memoryBytes <= *options_.memoryCapBytes;
  }

 private:
  static size_t idx(int i) { return static_cast<size_t>(i); }
  const std::vector<LayerCost>& layers_;
  const PartitionOptions& options_;
  int stages_;
  TieDedup ties_;
  std::vector<double> fwd_, bwd_, weight_;
  std::vector<size_t> static_, stash_, grad_;
  double totalSeconds_ = 0, totalBytes_ = 0;
};

double timeOf(const StagePlan& s) { return s.timeSeconds; }
double memoryOf(const StagePlan& s) { return static_cast<double>(s.memoryBytes); }
double costOf(const StagePlan& s) { return s.cost; }

// cutAllowed[i]: a stage may start at layer i (i = 0 always; with tiedLayersTogether no tie
// group spans the cut).
std::vector<bool> allowedCuts(const std::vector<LayerCost>& layers, bool tiedLayersTogether) {
  const int n = static_cast<int>(layers.size());
  if (!tiedLayersTogether) return std::vector<bool>(static_cast<size_t>(n) + 1, true);
  std::map<int, std::pair<int, int>> span;  // tie group -> first, last layer
  for (int i = 0; i < n; ++i) {
    const int g = layers[static_cast<size_t>(i)].tieGroup;
    if (g < 0) continue;
    auto it = span.find(g);
    if (it == span.end()) span[g] = {i, i};
    else it->second.second = i;
  }
  std::vector<bool> allowed(static_cast<size_t>(n) + 1, true);
  for (const auto& [group, range] : span)
    for (int i = range.first + 1; i <= range.second; ++i) allowed[static_cast<size_t>(i)] = false;
  return allowed;
}

// Min over contiguous partitions of max_k primary(stage k), subject to the cap, to
// primary <= primaryLimit and (when secondary is set) minimising max secondary instead.
// Returns the bounds (size stages + 1), or empty when infeasible.
struct DpResult {
  double value = kInf;
  std::vector<int> bounds;
};

template <typename F, typename G>
DpResult solve(const StageCalc& calc, const std::vector<bool>& allowed, int n, int stages,
               F limitOf, double limit, G objectiveOf) {
  const size_t N = static_cast<size_t>(n) + 1;
  std::vector<std::vector<double>> best(static_cast<size_t>(stages) + 1, std::vector<double>(N, kInf));
  std::vector<std::vector<int>> from(static_cast<size_t>(stages) + 1, std::vector<int>(N, -1));
  best[0][0] = 0;
  for (int k = 1; k <= stages; ++k) {
    // Stage k-1 covers [i, j): at least k-1 layers before it, stages-k after it.
    for (int j = k; j <= n - (stages - k); ++j) {
      if (j < n && !allowed[static_cast<size_t>(j)]) continue;
      double bestHere = kInf;
      int arg = -1;
      for (int i = k - 1; i < j; ++i) {
        const double prev = best[static_cast<size_t>(k - 1)][static_cast<size_t>(i)];
        if (prev == kInf) continue;
        const StagePlan s = calc.stage(k - 1, i, j);
        if (!calc.fitsCap(s) || limitOf(s) > limit) continue;
        const double v = std::max(prev, objectiveOf(s));
        if (v < bestHere) {
          bestHere = v;
          arg = i;
        }
      }
      best[static_cast<size_t>(k)][static_cast<size_t>(j)] = bestHere;
      from[static_cast<size_t>(k)][static_cast<size_t>(j)] = arg;
    }
  }
  DpResult out;
  out.value = best[static_cast<size_t>(stages)][static_cast<size_t>(n)];
  if (out.value == kInf) return out;
  out.bounds.assign(static_cast<size_t>(stages) + 1, 0);
  int j = n;
  for (int k = stages; k >= 1; --k) {
    out.bounds[static_cast<size_t>(k)] = j;
    j = from[static_cast<size_t>(k)][static_cast<size_t>(j)];
  }
  out.bounds[0] = 0;
  return out;
}

void checkInputs(const std::vector<LayerCost>& layers, int stages, const PartitionOptions& options) {
  const int n = static_cast<int>(layers.size());
  if (stages < 1) STRATA_THROW(ConfigError, "partition: the number of stages must be >= 1, got ", stages);
  if (n < 1) STRATA_THROW(ConfigError, "partition: the model has no layers");
  if (stages > n)
    STRATA_THROW(ConfigError, "partition: ", stages, " stages (partitions x virtual_stages) but the model has only ", n,
                 " layer(s); every stage needs at least one layer");
  if (!options.inFlight.empty() && static_cast<int>(options.inFlight.size()) != stages)
    STRATA_THROW(ConfigError, "partition: inFlight has ", options.inFlight.size(), " entries for ", stages, " stages");
  for (size_t k = 0; k < options.inFlight.size(); ++k)
    if (options.inFlight[k] < 1)
      STRATA_THROW(ConfigError, "partition: inFlight[", k, "] must be >= 1, got ", options.inFlight[k]);
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerCost& l = layers[i];
    if (!std::isfinite(l.forwardSeconds) || l.forwardSeconds < 0 || !std::isfinite(l.backwardSeconds) ||
        l.backwardSeconds < 0)
      STRATA_THROW(ConfigError, "partition: layer ", i, " (\"", l.name, "\") has invalid times forward=",
                   l.forwardSeconds, " s backward=", l.backwardSeconds, " s (must be finite and >= 0)");
  }
  validateLink(options.link);
  if (options.memoryWeight && !(*options.memoryWeight >= 0 && *options.memoryWeight <= 1))
    STRATA_THROW(ConfigError, "partition: memory_weight must be in [0, 1], got ", *options.memoryWeight);
}

}  // namespace

constexpr NamedValue<Objective> kObjectives[] = {{Objective::kSpeed, "speed"}, {Objective::kMemory, "memory"}};

Objective parseObjective(const std::string& name) { return parseNamed(kObjectives, name, "optimize: unknown value"); }

const char* objectiveName(Objective objective) { return nameOf(kObjectives, objective); }

Partition evaluateBounds(const std::vector<LayerCost>& layers, const std::vector<int>& bounds,
                         const PartitionOptions& options) {
  const int stages = static_cast<int>(bounds.size()) - 1;
  STRATA_CHECK(stages >= 1 && bounds.front() == 0 && bounds.back() == static_cast<int>(layers.size()),
               "evaluateBounds: bounds must run from 0 to the number of layers");
  StageCalc calc(layers, options, stages);
  Partition p;
  p.ok = true;
  p.stageOfLayer.assign(layers.size(), 0);
  for (int k = 0; k < stages; ++k) {
    const int first = bounds[static_cast<size_t>(k)];
    const int end = bounds[static_cast<size_t>(k) + 1];
    STRATA_CHECK(first < end, "evaluateBounds: stage ", k, " is empty (bounds ", first, "..", end, ")");
    p.stages.push_back(calc.stage(k, first, end));
    for (int i = first; i < end; ++i) p.stageOfLayer[static_cast<size_t>(i)] = k;
    p.bottleneckSeconds = std::max(p.bottleneckSeconds, p.stages.back().timeSeconds);
    p.peakMemoryBytes = std::max(p.peakMemoryBytes, p.stages.back().memoryBytes);
    p.bottleneckCost = std::max(p.bottleneckCost, p.stages.back().cost);
  }
  return p;
}

Partition partition(const std::vector<LayerCost>& layers, int stages, const PartitionOptions& options) {
  checkInputs(layers, stages, options);
  const int n = static_cast<int>(layers.size());
  const std::vector<bool> allowed = allowedCuts(layers, options.tiedLayersTogether);
  const int cuts = static_cast<int>(std::count(allowed.begin() + 1, allowed.end() - 1, true));
  Partition failed;
  if (cuts < stages - 1) {
    failed.reason = c10::str("tied layers (tie_group) leave only ", cuts, " place(s) to cut the ", n,
                             " layers, but ", stages, " stages need ", stages - 1,
                             "; use fewer partitions or untie the layers");
    return failed;
  }
  StageCalc calc(layers, options, stages);
  const bool speed = options.objective == Objective::kSpeed && !options.memoryWeight;
  auto primary = options.memoryWeight ? costOf : speed ? timeOf : memoryOf;
  auto secondary = speed ? memoryOf : timeOf;
  auto none = [](const StagePlan&) { return 0.0; };
  const DpResult first = solve(calc, allowed, n, stages, none, 0.0, primary);
  if (first.bounds.empty()) {
    // Only the memory cap can make it infeasible here: report the best we could do.
    PartitionOptions uncapped = options;
    uncapped.memoryCapBytes.reset();
    StageCalc free(layers, uncapped, stages);
    const DpResult best = solve(free, allowed, n, stages, none, 0.0, memoryOf);
    const Partition bestPartition = evaluateBounds(layers, best.bounds, uncapped);
    failed.reason = c10::str("cannot: no partition into ", stages, " stages keeps every stage within the memory cap of ",
                             formatBytes(*options.memoryCapBytes), "; the smallest achievable peak stage memory is ",
                             formatBytes(bestPartition.peakMemoryBytes), " (", bestPartition.peakMemoryBytes,
                             " bytes)");
    return failed;
  }
  // Among the partitions optimal for the primary objective, the best for the other one.
  const DpResult second = solve(calc, allowed, n, stages, primary, first.value, secondary);
  STRATA_CHECK(!second.bounds.empty(), "partition: internal error, tie-break pass found no partition");
  return evaluateBounds(layers, second.bounds, options);
}

Partition manualPartition(const std::vector<LayerCost>& layers, const std::vector<int>& stageOfLayer, int stages,
                          const PartitionOptions& options) {
  checkInputs(layers, stages, options);
  if (stageOfLayer.size() != layers.size())
    STRATA_THROW(ConfigError, "manual partition: ", stageOfLayer.size(), " stage numbers for ", layers.size(),
                 " layers");
  std::vector<int> bounds{0};
  std::map<int, int> stageOfTie;
  for (size_t i = 0; i < layers.size(); ++i) {
    const int s = stageOfLayer[i];
    const std::string which = c10::str("manual partition: layer ", i, " (\"", layers[i].name, "\")");
    if (s < 0 || s >= stages) STRATA_THROW(ConfigError, which, " is on stage ", s, "; stages are 0..", stages - 1);
    const int prev = i == 0 ? 0 : stageOfLayer[i - 1];
    if (s < prev)
      STRATA_THROW(ConfigError, which, " is on stage ", s, " after a layer on stage ", prev,
                   "; stages must be contiguous (non-decreasing in layer order)");
    if (s > prev + (i == 0 ? 0 : 1))
      STRATA_THROW(ConfigError, which, " is on stage ", s, " but stage ", prev + (i == 0 ? 0 : 1),
                   " has no layer; every stage needs at least one layer");
    if (i > 0 && s != prev) bounds.push_back(static_cast<int>(i));
    if (options.tiedLayersTogether && layers[i].tieGroup >= 0) {
      auto [it, inserted] = stageOfTie.emplace(layers[i].tieGroup, s);
      if (!inserted && it->second != s)
        STRATA_THROW(ConfigError, which, " shares tie_group ", layers[i].tieGroup, " with a layer on stage ",
                     it->second, " but is on stage ", s, "; tied layers must be on one stage");
    }
  }
  bounds.push_back(static_cast<int>(layers.size()));
  if (static_cast<int>(bounds.size()) - 1 != stages)
    STRATA_THROW(ConfigError, "manual partition: uses stages 0..", static_cast<int>(bounds.size()) - 2, " but ",
                 stages, " stages were requested; every stage needs at least one layer");
  Partition p = evaluateBounds(layers, bounds, options);
  if (options.memoryCapBytes && p.peakMemoryBytes > *options.memoryCapBytes) {
    Partition failed;
    failed.reason = c10::str("cannot: the manual partition's peak stage memory ", formatBytes(p.peakMemoryBytes),
                             " exceeds the memory cap of ", formatBytes(*options.memoryCapBytes));
    return failed;
  }
  return p;
}

std::vector<size_t> rankStaticBytes(const std::vector<LayerCost>& layers, const Partition& partition,
                                    int partitions) {
  STRATA_CHECK(partitions >= 1 && partition.ok, "rankStaticBytes: needs a partition and partitions >= 1");
  const TieDedup ties(layers);
  std::vector<size_t> out(static_cast<size_t>(partitions), 0);
  for (int r = 0; r < partitions; ++r) {
    std::vector<std::pair<int, int>> ranges;
    size_t bytes = 0;
    for (size_t k = static_cast<size_t>(r); k < partition.stages.size(); k += static_cast<size_t>(partitions)) {
      const StagePlan& s = partition.stages[k];
      ranges.emplace_back(s.firstLayer, s.endLayer);
      for (int i = s.firstLayer; i < s.endLayer; ++i) bytes += layers[static_cast<size_t>(i)].staticBytes();
    }
    out[static_cast<size_t>(r)] = bytes - ties.duplicateBytes(ranges);
  }
  return out;
}

}  // namespace strata::pipeline
