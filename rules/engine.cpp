#include "rules/engine.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/logging.h"
#include "rules/builtin.h"
#include "rules/registry.h"

namespace strata::rules {
namespace {

namespace fs = std::filesystem;

// Findings kept per rule for the summary, and written to findings.jsonl per rule.
constexpr size_t kRecentFindings = 20;
constexpr int64_t kMaxLoggedFindings = 1000;
// A gap of more empty windows than this (e.g. a clock jump) is skipped, not walked.
constexpr int64_t kMaxEmptyWindows = 10000;

int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

bool writeAtomically(const fs::path& path, const std::string& text) {
  return tryWriteFileAtomically(path.string(), text, Durability::kAtomicOnly);
}

}  // namespace

struct Engine::Slot {
  std::unique_ptr<Rule> rule;
  std::string name;
  std::string group;
  Rule::Input input = Rule::Input::kMetrics;
  std::vector<std::unique_ptr<Action>> actions;
  bool builtin = false;
  bool error = false;
  std::string errorReason;
  int64_t invocations = 0;
  int64_t triggeredInvocations = 0;
  int64_t findings = 0;
  bool everTriggered = false;
  std::deque<Finding> recent;
};

nlohmann::json RuleSummary::toJson() const {
  nlohmann::json j = {{"rule", name},          {"status", statusName(status)}, {"reason", reason},
                      {"RuleTriggered", ruleTriggered}, {"Violations", violations}, {"Datapoints", datapoints},
                      {"findings", findings}};
  if (!group.empty()) j["group"] = group;
  if (lastFinding) j["last_finding"] = lastFinding->toJson();
  return j;
}

Engine::Engine(EngineOptions options) : options_(std::move(options)) {}
Engine::~Engine() = default;

double Engine::now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void Engine::addRule(std::unique_ptr<Rule> rule, std::vector<std::unique_ptr<Action>> actions,
                     const std::string& group, int64_t scanIntervalUs) {
  STRATA_CHECK(rule != nullptr, "Engine::addRule: null rule");
  STRATA_CHECK(scanIntervalUs > 0, "Engine::addRule: scan interval must be positive, got ", scanIntervalUs);
  auto slot = std::make_unique<Slot>();
  slot->name = rule->name();
  for (const auto& s : slots_)
    if (s->name == slot->name)
      STRATA_THROW(ConfigError, "rule \"", slot->name, "\" is configured twice (each writes rule-output/", slot->name,
                   ".json)");
  slot->input = rule->input();
  slot->group = group;
  slot->builtin = isBuiltinRule(slot->name);
  slot->actions = std::move(actions);
  slot->rule = std::move(rule);
  const size_t index = slots_.size();
  if (slot->input == Rule::Input::kMetrics) {
    auto g = std::find_if(groups_.begin(), groups_.end(), [&](const WindowGroup& w) { return w.scanUs == scanIntervalUs; });
    if (g == groups_.end()) {
      groups_.push_back(WindowGroup{});
      groups_.back().scanUs = scanIntervalUs;
      g = groups_.end() - 1;
    }
    g->slots.push_back(index);
  }
  slots_.push_back(std::move(slot));
}

void Engine::addRules(const std::vector<RuleSpec>& specs) {
  // Sub-rules configured on their own are left out of ProfilerReport (one JSON each).
  std::vector<std::string> standalone;
  for (const RuleSpec& s : specs) standalone.push_back(s.name);
  BuiltinContext ctx;
  ctx.compat = options_.compat;
  for (const RuleSpec& spec : specs) {
    auto makeActions = [&]() {
      std::vector<std::unique_ptr<Action>> actions;
      const nlohmann::json list = spec.actions.is_null() ? nlohmann::json::array() : spec.actions;
      if (!list.is_array()) STRATA_THROW(ConfigError, "rule \"", spec.name, "\": \"actions\" must be a list");
      bool stop = false;
      for (const auto& a : list) {
        try {
          actions.push_back(parseAction(a));
          stop |= a.is_string() && a.get<std::string>() == "StopTraining";
        } catch (const std::exception& e) {
          STRATA_THROW(ConfigError, "rule \"", spec.name, "\": ", e.what());
        }
      }
      auto p = spec.parameters.find("stop_training_on_fire");
      if (spec.name == "StalledTrainingRule" && !stop && p != spec.parameters.end() &&
          (*p == true || *p == "True" || *p == "true"))
        actions.push_back(makeStopTrainingAction());
      return actions;
    };
    try {
      if (!spec.library.empty()) {
        addRule(loadPluginRule(spec.library, spec.name, spec.parameters), makeActions(), "",
                scanIntervalOf(spec.parameters));
      } else if (isRegisteredRule(spec.name)) {
        addRule(makeRegisteredRule(spec.name, spec.parameters), makeActions(), "", scanIntervalOf(spec.parameters));
      } else if (spec.name == "ProfilerReport") {
        int64_t scan = 0;
        auto subs = makeProfilerReportRules(spec.parameters, ctx, standalone, &scan);
        for (auto& sub : subs) addRule(std::move(sub), makeActions(), "ProfilerReport", scan);
        groupParams_["ProfilerReport"] = spec.parameters;
      } else {
        auto rule = makeBuiltinRule(spec.name, spec.parameters, ctx);
        const int64_t scan = rule->input() == Rule::Input::kMetrics ? scanIntervalOf(spec.parameters) : 60000000;
        addRule(std::move(rule), makeActions(), "", scan);
      }
    } catch (const ConfigError&) {
      throw;
    } catch (const std::exception& e) {
      STRATA_THROW(ConfigError, "rule \"", spec.name, "\": ", e.what());
    }
  }
}

void Engine::setTensorSource(std::unique_ptr<TensorSource> source) { tensors_ = std::move(source); }
void Engine::setMetricSource(std::unique_ptr<MetricSource> source) { metrics_ = std::move(source); }

bool Engine::needsTensors() const {
  return std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->input == Rule::Input::kTensors; });
}
bool Engine::needsMetrics() const { return !groups_.empty(); }

void Engine::fail(Slot& slot, const std::string& what) {
  slot.error = true;
  slot.errorReason = what;
  STRATA_LOG(kError, kRules, "rule ", slot.name, " failed and is disabled: ", what);
}

void Engine::handle(Slot& slot, std::vector<Finding> findings, int64_t timestampUs, std::vector<Finding>& out) {
  ++slot.invocations;
  // The reference's profiler rules report "condition met" in every window after their first
  // trigger (cumulative RuleTriggered); compat mode keeps that for actions and counts.
  if (findings.empty() && options_.compat && slot.builtin && slot.input == Rule::Input::kMetrics &&
      slot.everTriggered) {
    Finding f;
    f.rule = slot.name;
    f.timestampUs = timestampUs;
    f.message = "condition still met (compat: the reference's trigger count is cumulative)";
    f.details = {{"sticky", true}};
    findings.push_back(std::move(f));
  }
  if (findings.empty()) return;
  slot.everTriggered = true;
  ++slot.triggeredInvocations;
  for (Finding& f : findings) {
    if (f.rule.empty()) f.rule = slot.name;
    ++slot.findings;
    STRATA_LOG(kInfo, kRules, "rule ", f.rule, f.step >= 0 ? " step " + std::to_string(f.step) : std::string(), ": ",
               f.message);
    slot.recent.push_back(f);
    if (slot.recent.size() > kRecentFindings) slot.recent.pop_front();
    if (!options_.runDir.empty() && slot.findings <= kMaxLoggedFindings) {
      startRecord();
      std::ofstream log(fs::path(options_.runDir) / "rule-output" / "findings.jsonl", std::ios::app);
      if (!log) {
        std::error_code ec;
        fs::create_directories(fs::path(options_.runDir) / "rule-output", ec);
        createOutputFile((fs::path(options_.runDir) / "rule-output" / "findings.jsonl").string());
        log.open(fs::path(options_.runDir) / "rule-output" / "findings.jsonl", std::ios::app);
      }
      if (log) log << f.toJson().dump() << "\n";
    }
  }
  const ActionContext ctx{options_.runDir, options_.writeStopFile};
  for (auto& action : slot.actions) {
    try {
      action->run(findings.front(), ctx);
    } catch (const std::exception& e) {
      STRATA_LOG(kError, kRules, "rule ", slot.name, ": action ", action->name(), " failed: ", e.what());
    }
  }
  for (Finding& f : findings) out.push_back(std::move(f));
}

void Engine::processTensors(std::vector<Finding>& out) {
  if (!tensors_) return;
  tensors_->refresh();
  const Trial& trial = tensors_->trial();
  for (const StepInfo& step : trial.stepsAfter(anyStep_ ? lastStep_ : std::numeric_limits<int64_t>::min())) {
    for (auto& slot : slots_) {
      if (slot->error || slot->input != Rule::Input::kTensors) continue;
      try {
        handle(*slot, slot->rule->invokeAtStep(trial, step), -1, out);
      } catch (const std::exception& e) {
        fail(*slot, c10::str("at step ", step.step, ": ", e.what()));
      }
    }
    anyStep_ = true;
    lastStep_ = step.step;
  }
}

void Engine::feed(MetricBatch& batch) {
  if (!originSet_) {
    std::optional<int64_t> first = options_.compat ? metrics_->firstFileStampUs() : std::nullopt;
    if (!first) {
      int64_t m = INT64_MAX;
      for (const auto& s : batch.samples) m = std::min(m, s.timestampUs);
      for (const auto& e : batch.events) m = std::min(m, e.startUs);
      if (m != INT64_MAX) first = m;
    }
    if (!first) return;
    origin_ = *first;
    originSet_ = true;
  }
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    WindowGroup& g = groups_[gi];
    const bool lastGroup = gi + 1 == groups_.size();
    for (auto& s : batch.samples) {
      const int64_t rel = std::max<int64_t>(0, s.timestampUs - origin_);
      int64_t k = floorDiv(rel, g.scanUs);
      k = std::max(k, g.next);  // late data goes to the oldest open window
      if (options_.compat && rel % g.scanUs == 0 && k > g.next) g.open[k - 1].samples.push_back(s);
      if (lastGroup) {
        g.open[k].samples.push_back(std::move(s));
      } else {
        g.open[k].samples.push_back(s);
      }
    }
    for (auto& e : batch.events) {
      const int64_t relStart = std::max<int64_t>(0, e.startUs - origin_);
      int64_t k0 = floorDiv(relStart, g.scanUs), k1 = k0;
      if (options_.compat) {
        // Every window [s, s+scan] (both ends inclusive) the event overlaps.
        const int64_t relEnd = std::max<int64_t>(relStart, e.endUs - origin_);
        k1 = floorDiv(relEnd, g.scanUs);
        if (relStart % g.scanUs == 0 && k0 > 0) --k0;
      }
      k0 = std::max(k0, g.next);
      k1 = std::max(k1, k0);
      for (int64_t k = k0; k <= k1; ++k) {
        if (lastGroup && k == k1) {
          g.open[k].events.push_back(std::move(e));
        } else {
          g.open[k].events.push_back(e);
        }
      }
    }
  }
  for (const auto& s : batch.samples) maxTimeUs_ = std::max(maxTimeUs_, s.timestampUs);
  for (const auto& e : batch.events) maxTimeUs_ = std::max(maxTimeUs_, e.startUs);
}

void Engine::runWindow(WindowGroup& g, int64_t k, WindowData& data, bool last, std::vector<Finding>& out) {
  if (!options_.compat)
    std::stable_sort(data.samples.begin(), data.samples.end(),
                     [](const SystemSample& a, const SystemSample& b) { return a.timestampUs < b.timestampUs; });
  std::stable_sort(data.events.begin(), data.events.end(),
                   [](const FrameworkEvent& a, const FrameworkEvent& b) { return a.startUs < b.startUs; });
  MetricWindow w;
  w.index = k;
  w.startUs = origin_ + k * g.scanUs;
  w.endUs = w.startUs + g.scanUs;
  w.samples = &data.samples;
  w.events = &data.events;
  w.last = last;
  for (size_t index : g.slots) {
    Slot& slot = *slots_[index];
    if (slot.error) continue;
    try {
      handle(slot, slot.rule->invokeForWindow(w), w.endUs, out);
    } catch (const std::exception& e) {
      fail(slot, c10::str("in window ", k, ": ", e.what()));
    }
  }
}

void Engine::closeWindows(std::vector<Finding>& out, int64_t watermark, bool ended) {
  if (!originSet_) return;
  // Compat: the reference stops once a window starts at or after the latest file stamp (the
  // minute stamp of the newest system file: the last minute is never analysed).
  int64_t latest = INT64_MIN;  // INT64_MIN: unknown
  if (metrics_) latest = metrics_->latestFileStampUs().value_or(INT64_MIN);
  if (latest == INT64_MIN && ended && maxTimeUs_ != INT64_MIN) latest = floorDiv(maxTimeUs_, 60000000) * 60000000;
  for (WindowGroup& g : groups_) {
    int64_t limit;  // windows below this index are complete
    const int64_t compatLimit =
        latest != INT64_MIN ? std::max<int64_t>(0, floorDiv(latest - origin_ + g.scanUs - 1, g.scanUs))
                            : (ended ? 0 : INT64_MAX);
    if (!ended) {
      if (watermark == INT64_MIN) continue;
      // Default: all data before the window's end has arrived. Compat: its end is inclusive.
      const int64_t rel = watermark - origin_ - (options_.compat ? 1 : 0);
      limit = rel < 0 ? 0 : floorDiv(rel, g.scanUs);
      if (options_.compat) limit = std::min(limit, compatLimit);
    } else if (options_.compat) {
      limit = compatLimit;
    } else {
      limit = g.open.empty() ? g.next : std::max(g.next, g.open.rbegin()->first + 1);
    }
    for (int64_t k = g.next; k < limit; ++k) {
      auto it = g.open.find(k);
      if (it == g.open.end()) {
        auto nextData = g.open.lower_bound(k);
        const int64_t nextK = nextData == g.open.end() ? limit : nextData->first;
        if (nextK - k > kMaxEmptyWindows) {
          k = nextK - 1;  // jump over the gap
          continue;
        }
        WindowData empty;
        runWindow(g, k, empty, ended && k + 1 == limit, out);
      } else {
        runWindow(g, k, it->second, ended && k + 1 == limit, out);
        g.open.erase(it);
      }
      g.next = k + 1;
    }
    if (ended) {
      g.open.clear();  // compat: the dropped tail
      g.next = std::max(g.next, limit);
    }
  }
}

void Engine::processMetrics(std::vector<Finding>& out, bool final) {
  if (!metrics_ || groups_.empty()) return;
  MetricBatch batch;
  for (;;) {
    batch.clear();
    const bool got = metrics_->poll(batch, options_.batchItems);
    if (got) feed(batch);
    const bool ended = final || metrics_->finished();
    if (!got) {
      closeWindows(out, metrics_->watermarkUs(), ended);
      break;
    }
    // Close what the watermark allows while reading, so memory holds the open windows only.
    closeWindows(out, metrics_->watermarkUs(), false);
  }
}

void Engine::tick(std::vector<Finding>& out) {
  const double t = now();
  const Trial* trial = tensors_ ? &tensors_->trial() : nullptr;
  for (auto& slot : slots_) {
    if (slot->error) continue;
    try {
      auto f = slot->rule->onTick(trial, t);
      if (!f.empty()) handle(*slot, std::move(f), -1, out);
    } catch (const std::exception& e) {
      fail(*slot, c10::str("on tick: ", e.what()));
    }
  }
}

bool Engine::dataEnded() const {
  const bool tensorsDone = !tensors_ || tensors_->trial().finished();
  const bool metricsDone = !metrics_ || metrics_->finished();
  return tensorsDone && metricsDone;
}

std::vector<Finding> Engine::poll() {
  std::vector<Finding> out;
  if (finished_) return out;
  processTensors(out);
  processMetrics(out, false);
  tick(out);
  if (!options_.runDir.empty() && (!out.empty() || now() - lastWrite_ >= options_.writeIntervalSec)) {
    writeOutputs();
    lastWrite_ = now();
  }
  return out;
}

std::vector<Finding> Engine::finish() {
  std::vector<Finding> out;
  if (finished_) return out;
  processTensors(out);
  processMetrics(out, true);
  for (auto& slot : slots_) {
    if (slot->error) continue;
    try {
      auto f = slot->rule->finish();
      if (!f.empty()) handle(*slot, std::move(f), -1, out);
    } catch (const std::exception& e) {
      fail(*slot, c10::str("at finish: ", e.what()));
    }
  }
  finished_ = true;
  writeOutputs();
  return out;
}

std::optional<std::string> Engine::missingDataOf(const Slot& slot, const RuleReport& r) const {
  if (slot.invocations == 0 && r.datapoints == 0) {
    // Never invoked: the source itself is missing or empty.
    if (slot.input == Rule::Input::kTensors)
      return tensors_ ? std::string("no complete tensor step was saved")
                      : std::string("the run has no debugger output (no collections were saved)");
    return metrics_ ? std::string("the profiler wrote no samples or events")
                    : std::string("the run has no profiler output");
  }
  try {
    return slot.rule->missingData();
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kRules, "rule ", slot.name, ": missingData() failed: ", e.what());
  }
  return std::nullopt;
}

RuleReport Engine::reportOf(const Slot& slot) const {
  std::optional<RuleReport> r;
  try {
    r = slot.rule->report();
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kRules, "rule ", slot.name, ": report() failed: ", e.what());
  }
  if (r) return *r;
  RuleReport own;
  own.ruleTriggered = slot.triggeredInvocations;
  own.violations = slot.findings;
  own.datapoints = slot.invocations;
  return own;
}

std::vector<RuleSummary> Engine::summary() const {
  std::vector<RuleSummary> out;
  for (const auto& slot : slots_) {
    RuleSummary s;
    s.name = slot->name;
    s.group = slot->group;
    const RuleReport r = reportOf(*slot);
    s.ruleTriggered = r.ruleTriggered;
    s.violations = r.violations;
    s.datapoints = r.datapoints;
    s.findings = slot->findings;
    if (!slot->recent.empty()) s.lastFinding = slot->recent.back();
    const bool issues = slot->findings > 0 || r.ruleTriggered > 0;
    const std::optional<std::string> missing = issues ? std::nullopt : missingDataOf(*slot, r);
    if (slot->error) {
      s.status = RuleStatus::kError;
      s.reason = slot->errorReason;
    } else if (!finished_) {
      s.status = RuleStatus::kInProgress;
    } else {
      s.status = issues ? RuleStatus::kIssuesFound : missing ? RuleStatus::kNoData : RuleStatus::kNoIssuesFound;
    }
    if (s.reason.empty()) {
      if (s.lastFinding) {
        s.reason = s.lastFinding->message;
      } else if (missing) {
        s.reason = "no data: " + *missing;
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

nlohmann::json Engine::reportJson(const std::string& rule) const {
  const std::vector<RuleSummary> sums = summary();
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i]->name != rule) continue;
    nlohmann::json j = reportOf(*slots_[i]).toJson();
    j["Status"] = statusName(sums[i].status);
    j["StatusReason"] = sums[i].reason;
    return j;
  }
  return nullptr;
}

void Engine::startRecord() const {
  if (findingsStarted_ || options_.runDir.empty()) return;
  findingsStarted_ = true;
  // A new engine starts a new record: a re-run of `strata rules` replaces the old findings.
  std::error_code ec;
  fs::create_directories(fs::path(options_.runDir) / "rule-output", ec);
  createOutputFile((fs::path(options_.runDir) / "rule-output" / "findings.jsonl").string());
  std::ofstream(fs::path(options_.runDir) / "rule-output" / "findings.jsonl", std::ios::trunc);
}

void Engine::writeOutputs() const {
  if (options_.runDir.empty()) return;
  startRecord();
  const fs::path dir = fs::path(options_.runDir) / "rule-output";
  const std::vector<RuleSummary> sums = summary();
  nlohmann::json rules = nlohmann::json::array();
  std::map<std::string, nlohmann::json> groups;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& slot = *slots_[i];
    nlohmann::json j = reportOf(slot).toJson();
    j["Status"] = statusName(sums[i].status);
    j["StatusReason"] = sums[i].reason;
    if (!slot.group.empty()) j["Group"] = slot.group;
    if (!writeAtomically(dir / (slot.name + ".json"), j.dump(1) + "\n"))
      STRATA_LOG(kError, kRules, "cannot write ", (dir / (slot.name + ".json")).string());
    rules.push_back(sums[i].toJson());
    if (!slot.group.empty()) {
      nlohmann::json& g = groups[slot.group];
      if (g.is_null()) g = RuleReport{}.toJson();
      g["RuleTriggered"] = g["RuleTriggered"].get<int64_t>() + sums[i].ruleTriggered;
      g["Violations"] = g["Violations"].get<int64_t>() + sums[i].violations;
      g["Datapoints"] = std::max(g["Datapoints"].get<int64_t>(), sums[i].datapoints);
      g["Details"][slot.name] = {{"RuleTriggered", sums[i].ruleTriggered}, {"Status", statusName(sums[i].status)}};
    }
  }
  for (auto& [name, g] : groups) {
    std::string params;
    auto it = groupParams_.find(name);
    if (it != groupParams_.end())
      for (const auto& item : it->second.items())
        params += (params.empty() ? "" : "\n") + item.key() + ":" +
                  (item.value().is_string() ? item.value().get<std::string>() : item.value().dump());
    g["RuleParameters"] = params;
    bool inProgress = !finished_, issues = false, anyData = false;
    for (const auto& s : sums) {
      if (s.group != name) continue;
      issues |= s.status == RuleStatus::kIssuesFound;
      anyData |= s.status != RuleStatus::kNoData;
    }
    g["Status"] = inProgress ? "InProgress" : issues ? "IssuesFound" : anyData ? "NoIssuesFound" : "NoData";
    writeAtomically(dir / (name + ".json"), g.dump(1) + "\n");
  }
  nlohmann::json summaryJson = {{"finished", finished_}, {"compat", options_.compat}, {"rules", rules}};
  writeAtomically(dir / "summary.json", summaryJson.dump(1) + "\n");
}

}  // namespace strata::rules
