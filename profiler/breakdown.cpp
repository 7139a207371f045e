#include "profiler/breakdown.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "profiler/intervals.h"
#include "profiler/layout.h"

namespace strata::profiler {
namespace {

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool containsLower(const std::string& s, const char* needle) {
  std::string l = s;
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return l.find(needle) != std::string::npos;
}

std::optional<int> stageOf(const TraceEvent& e) {
  if (!e.args.is_object()) return std::nullopt;
  auto it = e.args.find("stage");
  if (it == e.args.end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int>();
  if (it->is_string()) {
    try {
      return std::stoi(it->get<std::string>());
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string rankList(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Ranks grouped by the stages they ran (the same work), in rank order.
std::map<std::vector<int>, std::vector<const RankTime*>> byStages(const std::vector<RankTime>& ranks) {
  std::map<std::vector<int>, std::vector<const RankTime*>> groups;
  for (const RankTime& r : ranks) groups[r.stages].push_back(&r);
  return groups;
}

std::string stagesText(const std::vector<int>& stages) {
  std::string out = stages.size() == 1 ? "stage " : "stages ";
  return out + rankList(stages);
}

// "Step:ModeKeys.EVAL" -> "EVAL".
std::string modeOfPhase(const std::string& phase) {
  const size_t dot = phase.rfind('.');
  return dot == std::string::npos ? std::string() : phase.substr(dot + 1);
}

}  // namespace

SliceClass classifySlice(const std::string& phase, const std::string& name) {
  if (startsWith(phase, "Step:ModeKeys")) return SliceClass::kStep;
  if (phase == "AllReduceWait") return SliceClass::kCommWait;
  if (phase == "Pipeline")
    return containsLower(name, "recv") || containsLower(name, "wait") || containsLower(name, "idle") ||
                   containsLower(name, "bubble")
               ? SliceClass::kPipelineWait
               : SliceClass::kComm;
  for (const char* comm : {"allreduce", "allgather", "reduce_scatter", "broadcast", "nccl", "barrier"})
    if (containsLower(phase, comm)) return SliceClass::kComm;
  if (startsWith(phase, "DataLoader")) return SliceClass::kDataLoading;
  if (startsWith(phase, "Forward") || startsWith(phase, "Backward") || phase == "Optimizer") return SliceClass::kCompute;
  return SliceClass::kOther;
}

std::optional<double> RankTime::overlapPercent() const {
  if (commUs <= 0) return std::nullopt;
  return 100.0 * static_cast<double>(overlappedCommUs) / static_cast<double>(commUs);
}

double RankTime::medianComputeUs() const {
  std::vector<double> train, all;
  for (const auto& kv : computeByStep) {
    all.push_back(static_cast<double>(kv.second));
    if (kv.first.mode == "TRAIN") train.push_back(static_cast<double>(kv.second));
  }
  return median(train.empty() ? std::move(all) : std::move(train));
}

std::string modeOfSlice(const std::vector<StepSlice>& steps, int64_t stepNum, int64_t startUs) {
  const StepSlice* containing = nullptr;
  const StepSlice* before = nullptr;
  const StepSlice* first = nullptr;
  for (const StepSlice& s : steps) {
    if (s.step != stepNum) continue;
    if (s.startUs <= startUs && startUs < s.endUs) containing = &s;
    if (s.startUs <= startUs && (before == nullptr || s.startUs > before->startUs)) before = &s;
    if (first == nullptr || s.startUs < first->startUs) first = &s;
  }
  if (containing != nullptr) return containing->mode;
  if (before != nullptr) return before->mode;
  return first != nullptr ? first->mode : std::string();
}

RankTime rankTime(int rank, const std::vector<const TraceEvent*>& events) {
  RankTime r;
  r.rank = rank;
  std::vector<Interval> compute, comm, commWait, pipeWait, data;
  // (step number, start) of each compute slice, keyed by mode once the Step slices are known.
  std::map<std::pair<int64_t, int64_t>, std::vector<Interval>> computeSteps;
  std::vector<StepSlice> stepSlices;
  std::set<int> stages;
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (const TraceEvent* e : events) {
    const SliceClass c = classifySlice(e->phase, e->name);
    if (c == SliceClass::kOther) continue;
    first = std::min(first, e->startUs);
    last = std::max(last, e->endUs);
    const Interval i{e->startUs, e->endUs};
    switch (c) {
      case SliceClass::kStep:
        ++r.steps;
        if (auto s = e->stepNum()) stepSlices.push_back({modeOfPhase(e->phase), *s, e->startUs, e->endUs});
        break;
      case SliceClass::kCompute:
        compute.push_back(i);
        if (auto s = e->stepNum()) computeSteps[{*s, e->startUs}].push_back(i);
        if (auto st = stageOf(*e)) stages.insert(*st);
        break;
      case SliceClass::kComm: comm.push_back(i); break;
      case SliceClass::kCommWait: commWait.push_back(i); break;
      case SliceClass::kPipelineWait: pipeWait.push_back(i); break;
      case SliceClass::kDataLoading: data.push_back(i); break;
      case SliceClass::kOther: break;
    }
  }
  if (first == INT64_MAX) return r;
  r.stages.assign(stages.begin(), stages.end());
  r.periodUs = last - first;
  const IntervalSet computeSet = unite(std::move(compute)), commSet = unite(std::move(comm));
  const IntervalSet commAll = unite(commSet, unite(std::move(commWait)));
  const IntervalSet exposed = subtract(commAll, computeSet);
  const IntervalSet busy = unite(computeSet, commAll);
  const IntervalSet pipe = subtract(unite(std::move(pipeWait)), busy);
  const IntervalSet loading = subtract(unite(std::move(data)), unite(busy, pipe));
  r.computeUs = lengthUs(computeSet);
  r.exposedCommUs = lengthUs(exposed);
  r.pipelineWaitUs = lengthUs(pipe);
  r.dataLoadingUs = lengthUs(loading);
  r.idleUs = std::max<int64_t>(0, r.periodUs - r.computeUs - r.exposedCommUs - r.pipelineWaitUs - r.dataLoadingUs);
  r.commUs = lengthUs(commSet);
  r.overlappedCommUs = lengthUs(intersect(commSet, computeSet));
  std::map<StepKey, std::vector<Interval>> byKey;
  for (auto& [numAndStart, slices] : computeSteps) {
    std::vector<Interval>& into = byKey[StepKey{modeOfSlice(stepSlices, numAndStart.first, numAndStart.second),
                                                numAndStart.first}];
    into.insert(into.end(), slices.begin(), slices.end());
  }
  for (auto& [key, slices] : byKey) r.computeByStep[key] = lengthUs(unite(std::move(slices)));
  return r;
}

std::vector<Straggler> findStragglers(const std::vector<RankTime>& ranks, const BreakdownOptions& o) {
  std::vector<Straggler> out;
  for (const auto& [stages, group] : byStages(ranks)) {
    if (group.size() < 2) continue;
    // The steps every rank of the group has compute in.
    std::vector<StepKey> shared;
    for (const auto& kv : group.front()->computeByStep) {
      bool everywhere = true;
      for (const RankTime* r : group) everywhere &= r->computeByStep.count(kv.first) > 0;
      if (everywhere) shared.push_back(kv.first);
    }
    if (static_cast<int64_t>(shared.size()) < o.minSteps) continue;
    std::map<int, int64_t> slowest;
    for (const StepKey& step : shared) {
      const RankTime* worst = group.front();
      for (const RankTime* r : group)
        if (r->computeByStep.at(step) > worst->computeByStep.at(step)) worst = r;
      ++slowest[worst->rank];
    }
    for (const RankTime* r : group) {
      std::vector<double> own, peers;
      std::vector<int> peerRanks;
      for (const StepKey& step : shared) own.push_back(static_cast<double>(r->computeByStep.at(step)));
      for (const RankTime* p : group) {
        if (p == r) continue;
        peerRanks.push_back(p->rank);
        for (const StepKey& step : shared) peers.push_back(static_cast<double>(p->computeByStep.at(step)));
      }
      const double mine = median(own), theirs = median(peers);
      const double share = static_cast<double>(slowest[r->rank]) / static_cast<double>(shared.size());
      if (theirs <= 0 || share < o.stragglerShare || mine < o.stragglerRatio * theirs) continue;
      Straggler s;
      s.rank = r->rank;
      s.peers = peerRanks;
      s.slowestSteps = slowest[r->rank];
      s.comparedSteps = static_cast<int64_t>(shared.size());
      s.computeMs = mine / 1000;
      s.peersMs = theirs / 1000;
      s.ratio = mine / theirs;
      s.evidence = "rank " + std::to_string(r->rank) + " was the slowest in " + std::to_string(s.slowestSteps) + " of " +
                   std::to_string(s.comparedSteps) + " steps" + (stages.empty() ? "" : " of " + stagesText(stages)) +
                   "; its compute per step (median " + fixed(s.computeMs, 2) + " ms) is " + fixed(s.ratio, 2) +
                   "x that of rank(s) " + rankList(peerRanks) + " (" + fixed(s.peersMs, 2) + " ms)";
      out.push_back(std::move(s));
    }
  }
  return out;
}

std::optional<SlowStage> findSlowStage(const std::vector<RankTime>& ranks, const BreakdownOptions& o) {
  const auto groups = byStages(ranks);
  if (groups.size() < 2 || groups.count({})) return std::nullopt;  // not (only) a pipeline
  std::vector<std::pair<const std::vector<int>*, double>> perStage;
  double sum = 0;
  for (const auto& [stages, group] : groups) {
    std::vector<double> medians;
    for (const RankTime* r : group)
      if (static_cast<int64_t>(r->computeByStep.size()) >= o.minSteps) medians.push_back(r->medianComputeUs());
    if (medians.empty()) return std::nullopt;
    perStage.emplace_back(&stages, median(medians));
    sum += perStage.back().second;
  }
  const double mean = sum / static_cast<double>(perStage.size());
  auto worst = std::max_element(perStage.begin(), perStage.end(),
                                [](const auto& a, const auto& b) { return a.second < b.second; });
  if (mean <= 0 || worst->second < o.stageRatio * mean) return std::nullopt;
  SlowStage s;
  s.stages = *worst->first;
  for (const RankTime* r : groups.at(s.stages)) s.ranks.push_back(r->rank);
  s.computeMs = worst->second / 1000;
  s.meanMs = mean / 1000;
  s.ratio = worst->second / mean;
  s.evidence = stagesText(s.stages) + " (rank " + rankList(s.ranks) + ") computes " + fixed(s.computeMs, 2) +
               " ms per step, " + fixed(s.ratio, 2) + "x the mean of the " + std::to_string(perStage.size()) +
               " stage groups (" + fixed(s.meanMs, 2) + " ms): the pipeline waits for it";
  return s;
}

Breakdown analyzeBreakdown(const std::vector<TraceEvent>& events, const BreakdownOptions& options) {
  std::map<int, std::vector<const TraceEvent*>> byRank;
  for (const TraceEvent& e : events)
    if (e.rank >= 0) byRank[e.rank].push_back(&e);
  Breakdown b;
  for (const auto& [rank, list] : byRank) {
    RankTime r = rankTime(rank, list);
    if (r.periodUs > 0) b.ranks.push_back(std::move(r));
  }
  if (b.ranks.empty()) return b;
  const auto groups = byStages(b.ranks);
  bool replicas = false;
  for (const auto& g : groups) replicas |= g.second.size() > 1;
  if (b.ranks.size() == 1) {
    b.layout = "single rank";
  } else if (groups.count({})) {
    b.layout = "data parallel";
  } else {
    b.layout = replicas ? "hybrid" : "pipeline";
  }
  b.stragglers = findStragglers(b.ranks, options);
  b.slowStage = findSlowStage(b.ranks, options);
  return b;
}

nlohmann::json toJson(const Breakdown& b) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankTime& r : b.ranks) {
    nlohmann::json j = {{"rank", r.rank},
                        {"stages", r.stages},
                        {"steps", r.steps},
                        {"period_s", r.periodUs / 1e6},
                        {"compute_s", r.computeUs / 1e6},
                        {"exposed_comm_s", r.exposedCommUs / 1e6},
                        {"pipeline_wait_s", r.pipelineWaitUs / 1e6},
                        {"data_loading_s", r.dataLoadingUs / 1e6},
                        {"idle_s", r.idleUs / 1e6},
                        {"comm_s", r.commUs / 1e6},
                        {"median_compute_per_step_ms", r.medianComputeUs() / 1000}};
    if (auto o = r.overlapPercent()) j["overlap_percent"] = *o;
    // mode -> step -> ms ("" mode: the timeline had no Step slice for those steps).
    nlohmann::json steps = nlohmann::json::object();
    for (const auto& [key, us] : r.computeByStep) steps[key.mode][std::to_string(key.step)] = us / 1000.0;
    j["compute_ms_by_step"] = steps;
    ranks.push_back(std::move(j));
  }
  nlohmann::json stragglers = nlohmann::json::array();
  for (const Straggler& s : b.stragglers)
    stragglers.push_back({{"rank", s.rank},
                          {"peers", s.peers},
                          {"slowest_steps", s.slowestSteps},
                          {"compared_steps", s.comparedSteps},
                          {"compute_ms", s.computeMs},
                          {"peers_ms", s.peersMs},
                          {"ratio", s.ratio},
                          {"evidence", s.evidence}});
  nlohmann::json j = {{"layout", b.layout}, {"ranks", ranks}, {"stragglers", stragglers}};
  if (b.slowStage)
    j["slow_stage"] = {{"stages", b.slowStage->stages}, {"ranks", b.slowStage->ranks},
                       {"compute_ms", b.slowStage->computeMs}, {"mean_ms", b.slowStage->meanMs},
                       {"ratio", b.slowStage->ratio}, {"evidence", b.slowStage->evidence}};
  return j;
}

Breakdown breakdownOfRun(const std::string& runDir, bool closedOnly, const BreakdownOptions& options,
                         size_t* files) {
  TimelineReader reader(resolveProfilerRoot(runDir), !closedOnly);
  reader.refresh();
  if (files != nullptr) *files = reader.files().size();
  return analyzeBreakdown(reader.events(TraceQuery{}), options);
}

}  // namespace strata::profiler
