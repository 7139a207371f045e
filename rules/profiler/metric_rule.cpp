#include "rules/profiler/metric_rule.h"

#include "rules/stats.h"

#include <cctype>
#include <cstring>

namespace strata::rules {

double& OrderedSums::operator[](const std::string& key) {
  auto it = index_.find(key);
  if (it != index_.end()) return items_[it->second].second;
  index_.emplace(key, items_.size());
  items_.emplace_back(key, 0.0);
  return items_.back().second;
}

double OrderedSums::total() const {
  double t = 0;
  for (const auto& kv : items_) t += kv.second;
  return t;
}

bool containsNoCase(const std::string& haystack, const char* needle) {
  const size_t n = std::strlen(needle);
  if (n == 0) return true;
  if (haystack.size() < n) return false;
  for (size_t i = 0; i + n <= haystack.size(); ++i) {
    size_t j = 0;
    while (j < n && std::tolower(static_cast<unsigned char>(haystack[i + j])) ==
                        std::tolower(static_cast<unsigned char>(needle[j])))
      ++j;
    if (j == n) return true;
  }
  return false;
}

OrderedSums& FrameworkBreakdown::phaseSums(std::vector<std::pair<std::string, OrderedSums>>& v,
                                           const std::string& phase) {
  for (auto& kv : v)
    if (kv.first == phase) return kv.second;
  v.emplace_back(phase, OrderedSums{});
  return v.back().second;
}

void FrameworkBreakdown::add(const FrameworkEvent& e) {
  ++events_;
  const double dur = static_cast<double>(e.endUs - e.startUs);
  const std::string& phase = e.phase;
  if (containsNoCase(phase, "cpu")) {
    phaseSums(cpu, phase)[e.name] += dur;
  } else if (containsNoCase(phase, "gpu")) {
    phaseSums(gpu, phase)[e.name] += dur;
  } else if (phase.find("Step") != std::string::npos) {
    stepPhases[phase] += dur;
  } else if (phase == "Forward-SubModuleInternal") {
    forward[e.name] += dur;
  } else if (phase == "Backward-SubModuleInternal") {
    backward[e.name] += dur;
  } else if (phase.find(":CPU") == std::string::npos && phase.find(":GPU") == std::string::npos &&
             !e.horovodTimeline) {
    general[phase] += dur;
  } else if (e.horovodTimeline) {
    horovod[e.name] += dur;
  }
}

void filterOperators(const std::vector<std::pair<std::string, OrderedSums>>& byPhase,
                     double threshold, nlohmann::json* percents, nlohmann::json* times) {
  OrderedSums ops;
  for (const auto& phase : byPhase)
    for (const auto& kv : phase.second.items()) ops[kv.first] += kv.second;
  const double total = ops.total();
  *percents = nlohmann::json::object();
  *times = nlohmann::json::object();
  if (total <= 0) return;
  std::vector<std::pair<std::string, std::pair<double, double>>> kept;
  double keptTotal = 0;
  for (const auto& kv : ops.items()) {
    const double pct = kv.second / total * 100;
    if (pct > threshold) {
      kept.push_back({kv.first, {pct, kv.second}});
      keptTotal += pct;
    }
  }
  for (const auto& k : kept) {
    (*percents)[k.first] = k.second.first / keptTotal * 100;
    (*times)[k.first] = k.second.second;
  }
}

namespace {

nlohmann::json percentOf(const OrderedSums& sums) {
  nlohmann::json out = nlohmann::json::object();
  const double total = sums.total();
  if (total <= 0) return out;
  for (const auto& kv : sums.items()) out[kv.first] = kv.second / total * 100;
  return out;
}

}  // namespace

void FrameworkBreakdown::toDetails(nlohmann::json& details, bool compatRatioBug) const {
  std::vector<std::string> labels;
  std::vector<double> totals;
  for (const auto& kv : cpu) labels.push_back(kv.first);
  for (const auto& kv : gpu) labels.push_back(kv.first);
  if (compatRatioBug) {
    for (const auto& kv : gpu) totals.push_back(kv.second.total());
    for (const auto& kv : cpu) totals.push_back(kv.second.total());
  } else {
    for (const auto& kv : cpu) totals.push_back(kv.second.total());
    for (const auto& kv : gpu) totals.push_back(kv.second.total());
  }
  double sum = 0;
  for (double t : totals) sum += t;
  nlohmann::json ratio = nlohmann::json::object();
  if (sum > 0)
    for (size_t i = 0; i < labels.size() && i < totals.size(); ++i) ratio[labels[i]] = totals[i] / sum * 100.0;
  details["ratio"] = ratio;
  if (!cpu.empty()) filterOperators(cpu, 2, &details["CPU"], &details["CPU_total"]);
  if (!gpu.empty()) filterOperators(gpu, 2, &details["GPU"], &details["GPU_total"]);
  details["phase"] = percentOf(stepPhases);
  details["phase_time"] = nlohmann::json::object();
  if (!general.empty()) details["general"] = percentOf(general);
  if (!forward.empty() && !backward.empty()) {
    const double f = forward.total(), b = backward.total();
    if (f + b > 0)
      details["forward_backward"] = {{"Forward pass", f / (f + b) * 100},
                                     {"Backward pass", b / (f + b) * 100}};
  }
  if (!horovod.empty()) {
    const double total = horovod.total();
    OrderedSums kept;
    for (const auto& kv : horovod.items())
      if (kv.second > 0 && kv.second / total > 0.02) kept[kv.first] = kv.second;
    details["horovod"] = percentOf(kept);
  }
}

bool isEvaluationStep(const FrameworkEvent& e) {
  for (const char* mode : {"Step:ModeKeys.EVAL", "Step:ModeKeys.PREDICT"})
    if (e.name.find(mode) != std::string::npos || e.phase.find(mode) != std::string::npos) return true;
  return false;
}

bool isStepEvent(const FrameworkEvent& e) {
  return e.name.find("Step:ModeKeys") != std::string::npos ||
         e.phase.find("Step:ModeKeys") != std::string::npos;
}

EventClass classifyEvent(const FrameworkEvent& e) {
  if (isStepEvent(e)) return EventClass::kStep;
  auto either = [&](const char* s) { return containsNoCase(e.phase, s) || containsNoCase(e.name, s); };
  if (e.phase.rfind("DataLoader", 0) == 0 || either("dataloader") || either("data_wait"))
    return EventClass::kData;
  if (either("wait") || either("idle") || either("bubble") || either("recv")) return EventClass::kWait;
  if (e.horovodTimeline || either("allreduce") || either("all_reduce") || either("allgather") ||
      either("all_gather") || either("reduce_scatter") || either("reducescatter") ||
      either("broadcast") || either("nccl") || either("barrier") || either("send") ||
      containsNoCase(e.phase, "pipeline") || either("comm"))
    return EventClass::kComm;
  if (containsNoCase(e.phase, "backward")) return EventClass::kBackward;
  if (containsNoCase(e.phase, "forward")) return EventClass::kForward;
  if (containsNoCase(e.phase, "optimizer") || containsNoCase(e.name, "optimizer")) return EventClass::kOptimizer;
  return EventClass::kOther;
}

bool isTopLevelCompute(const FrameworkEvent& e, EventClass c) {
  if (c != EventClass::kForward && c != EventClass::kBackward && c != EventClass::kOptimizer) return false;
  return e.phase.find("SubModuleInternal") == std::string::npos;
}

const char* eventClassName(EventClass c) {
  switch (c) {
    case EventClass::kStep: return "step";
    case EventClass::kForward: return "forward";
    case EventClass::kBackward: return "backward";
    case EventClass::kOptimizer: return "optimizer";
    case EventClass::kComm: return "communication";
    case EventClass::kWait: return "wait";
    case EventClass::kData: return "data";
    case EventClass::kOther: return "other";
  }
  return "other";
}

std::string eventNodeKey(const FrameworkEvent& e) {
  if (!e.node.empty()) return e.node;
  return "rank-" + std::to_string(e.rank);
}

std::string eventHostKey(const FrameworkEvent& e) {
  const std::string node = eventNodeKey(e);
  if (e.node.empty() || e.rank < 0) return node;
  const std::string suffix = "-" + std::to_string(e.rank);
  if (node.size() <= suffix.size() || node.compare(node.size() - suffix.size(), suffix.size(), suffix) != 0) return node;
  return node.substr(0, node.size() - suffix.size());
}

}  // namespace strata::rules

namespace strata::rules {

nlohmann::json boxJson(const std::vector<double>& sorted, bool withP05) {
  const stats::BoxStats b = stats::boxStats(sorted);
  nlohmann::json j = {{"p25", b.p25}, {"p50", b.p50}, {"p75", b.p75}, {"p95", b.p95},
                      {"upper", b.upper}, {"lower", b.lower}};
  if (withP05) j["p05"] = b.p05;
  return j;
}

}  // namespace strata::rules
