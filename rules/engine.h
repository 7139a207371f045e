// The rule engine: runs rules over a tensor source and a metric source, online (poll() as data
// arrives, e.g. from RuleRunner's thread) or offline (poll() then finish() over a finished run),
// with the same code. It keeps each rule's status, runs its actions, and writes
// rule-output/<Rule>.json (the reference report shape plus "Status"/"StatusReason"),
// rule-output/summary.json and rule-output/findings.jsonl.
//
// Metric data is cut into scan windows [origin + k*scan, origin + (k+1)*scan) (per distinct
// scan_interval_us); a window is handed to the rules once the source's watermark has passed
// its end, so memory holds only the open windows. Compat mode reproduces the reference's
// windowing: both ends inclusive (boundary samples belong to two windows), framework events
// in every window they overlap, the origin at the first system file's stamp, and the last
// minute of data dropped (docs/rules.md).
//
// Threading: not thread-safe; one thread calls everything (RuleRunner wraps it).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "rules/actions.h"
#include "rules/sources.h"
#include "strata/rules.h"

namespace strata::rules {

// One configured rule: a built-in (ProfilerReport included), a registered custom rule, or a
// rule from a shared library.
struct RuleSpec {
  RuleSpec() = default;
  RuleSpec(std::string n, nlohmann::json params = nlohmann::json::object(),
           nlohmann::json acts = nlohmann::json::array(), std::string lib = "")
      : name(std::move(n)), parameters(std::move(params)), actions(std::move(acts)), library(std::move(lib)) {}

  std::string name;
  nlohmann::json parameters = nlohmann::json::object();
  nlohmann::json actions = nlohmann::json::array();  // "StopTraining" | "log" | {"command": ...}
  std::string library;                               // load `name` from this shared library
};

struct EngineOptions {
  std::string runDir;           // rule-output/ is written under it; "" writes nothing
  bool compat = false;          // reproduce the reference's verdicts (built-in rules)
  bool writeStopFile = false;   // StopTraining also writes rule-output/stop_training.json
  std::function<double()> clock;  // wall clock in s since the epoch; default system_clock
  double writeIntervalSec = 30;   // poll() rewrites rule-output/ at most this often
  size_t batchItems = 262144;     // items pulled from the metric source per batch
};

struct RuleSummary {
  std::string name;
  std::string group;  // "ProfilerReport" for its sub-rules, else ""
  RuleStatus status = RuleStatus::kInProgress;
  std::string reason;  // Error: the exception; otherwise the last finding or why nothing ran
  int64_t ruleTriggered = 0, violations = 0, datapoints = 0;
  int64_t findings = 0;
  std::optional<Finding> lastFinding;

  nlohmann::json toJson() const;
};

class Engine {
 public:
  explicit Engine(EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Builds and adds rules. Throws strata::ConfigError naming the rule on unknown rules, bad
  // parameters or actions, or a library that cannot be loaded.
  void addRules(const std::vector<RuleSpec>& specs);
  // Adds a rule object (custom rules built in code). Metric rules get windows of `scanIntervalUs`.
  void addRule(std::unique_ptr<Rule> rule, std::vector<std::unique_ptr<Action>> actions = {},
               const std::string& group = "", int64_t scanIntervalUs = 60000000);

  void setTensorSource(std::unique_ptr<TensorSource> source);
  void setMetricSource(std::unique_ptr<MetricSource> source);
  bool needsTensors() const;
  bool needsMetrics() const;

  // Processes what is new: steps that became complete, windows the watermark has passed, the
  // clock tick. Runs actions; returns this call's findings.
  std::vector<Finding> poll();
  // The data has ended: processes everything left (the last, partial window included, except
  // in compat mode), calls each rule's finish(), fixes the statuses and writes rule-output/.
  std::vector<Finding> finish();
  bool finished() const { return finished_; }
  // Every source reports the end of its data (job end marker seen and everything read).
  bool dataEnded() const;

  std::vector<RuleSummary> summary() const;
  // rule-output/<rule>.json's content for one rule (null when there is no such rule).
  nlohmann::json reportJson(const std::string& rule) const;
  // Writes rule-output/ now (no-op without runDir).
  void writeOutputs() const;
  const EngineOptions& options() const { return options_; }

 private:
  struct Slot;
  struct WindowData {
    std::vector<SystemSample> samples;
    std::vector<FrameworkEvent> events;
  };
  struct WindowGroup {
    int64_t scanUs = 60000000;
    std::vector<size_t> slots;
    std::map<int64_t, WindowData> open;
    int64_t next = 0;
  };

  void processTensors(std::vector<Finding>& out);
  void processMetrics(std::vector<Finding>& out, bool final);
  void feed(MetricBatch& batch);
  void closeWindows(std::vector<Finding>& out, int64_t watermark, bool ended);
  void runWindow(WindowGroup& g, int64_t k, WindowData& data, bool last, std::vector<Finding>& out);
  void tick(std::vector<Finding>& out);
  void handle(Slot& slot, std::vector<Finding> findings, int64_t timestampUs, std::vector<Finding>& out);
  void fail(Slot& slot, const std::string& what);
  RuleReport reportOf(const Slot& slot) const;
  std::optional<std::string> missingDataOf(const Slot& slot, const RuleReport& r) const;
  void startRecord() const;
  double now() const;

  EngineOptions options_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<WindowGroup> groups_;
  std::unique_ptr<TensorSource> tensors_;
  std::unique_ptr<MetricSource> metrics_;
  bool originSet_ = false;
  int64_t origin_ = 0;
  int64_t maxTimeUs_ = INT64_MIN;
  bool anyStep_ = false;
  int64_t lastStep_ = 0;
  bool finished_ = false;
  double lastWrite_ = 0;
  mutable bool findingsStarted_ = false;  // findings.jsonl truncated by this engine (startRecord)
  std::map<std::string, nlohmann::json> groupParams_;  // group -> its RuleParameters
};

// Rule specs from the job config's "rules" section (config::RuleConfig: name, actions,
// parameters).
template <typename Config>
std::vector<RuleSpec> specsFromConfig(const std::vector<Config>& rules) {
  std::vector<RuleSpec> specs;
  for (const auto& r : rules) {
    RuleSpec s;
    s.name = r.name;
    for (const auto& kv : r.parameters) s.parameters[kv.first] = kv.second;
    for (const auto& a : r.actions) s.actions.push_back(a);
    specs.push_back(std::move(s));
  }
  return specs;
}

// A rules file: {"compat": false, "rules": [{"name", "parameters", "actions", "library"}]}.
// Throws strata::ConfigError naming `source` and the JSON path.
struct RulesFile {
  bool compat = false;
  std::vector<RuleSpec> rules;
};
RulesFile parseRulesFile(const std::string& text, const std::string& source);

}  // namespace strata::rules
