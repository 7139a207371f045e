// Strata rules: the public interface for custom rules, their inputs and findings, and the
// StopTraining signal (docs/rules.md).
//
// A rule is a small state machine over one of two streams:
//   - tensors: the engine calls invokeAtStep() once per complete saved step, in step order,
//     with a read-only view of the trial (tensor names, steps, values, reductions);
//   - metrics: the engine calls invokeForWindow() once per scan window (default 60 s) with the
//     window's system samples and framework events.
// Rules do no I/O, never block, and return findings instead of throwing. An exception that
// escapes a rule puts it in status Error (with the message) and the engine stops calling it;
// the other rules go on.
//
// Threading: the engine calls one rule from one thread at a time; a rule needs no locking.
// StopSignal is thread-safe.
//
// Everything here is header-only except registerRule() and StopSignal, so a rule compiled into
// a shared library (loaded through the config, see STRATA_RULE_PLUGIN below) needs nothing from
// the host binary at link time. Such a library must be built with the same compiler and standard
// library as the host (it passes C++ objects across the boundary).
#pragma once

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "strata/types.h"

namespace strata::rules {

// ---------------------------------------------------------------------------------------------
// Metric inputs (profiler output; specs/smdebug.md §2)

// What a system sample measures; the rules dispatch on this, not on strings.
enum class MetricKind : uint8_t {
  kCpuUtilization,     // type cpu, dimension CPUUtilization, name cpuN, % of one core
  kIoWait,             // type cpu, dimension I/OWaitPercentage, name cpuN, %
  kGpuUtilization,     // type gpu, dimension GPUUtilization, name gpuN, %
  kGpuMemory,          // type gpu, dimension GPUMemoryUtilization, name gpuN, %
  kHostMemory,         // name MemoryUsedPercent, %
  kNetwork,            // dimension Algorithm (bytes/s)
  kOther,
};

// Maps the smdebug (dimension, name) pair to a MetricKind.
inline MetricKind classifyMetric(const std::string& dimension, const std::string& name) {
  if (dimension == "CPUUtilization") return MetricKind::kCpuUtilization;
  if (dimension == "I/OWaitPercentage") return MetricKind::kIoWait;
  if (dimension == "GPUUtilization") return MetricKind::kGpuUtilization;
  if (dimension == "GPUMemoryUtilization") return MetricKind::kGpuMemory;
  if (name == "MemoryUsedPercent") return MetricKind::kHostMemory;
  if (dimension == "Algorithm") return MetricKind::kNetwork;
  return MetricKind::kOther;
}

// One row of a system-metrics file.
struct SystemSample {
  int64_t timestampUs = 0;  // µs since the epoch (the file's float seconds × 1e6)
  std::string node;         // "algo-1"
  std::string dimension;    // "CPUUtilization", "GPUUtilization", ...
  std::string name;         // "cpu3", "gpu0", "MemoryUsedPercent"
  double value = 0;
  MetricKind kind = MetricKind::kOther;  // set with classifyMetric(dimension, name)
};

// One complete framework-trace event (Chrome trace "X" event, or a matched B/E pair).
struct FrameworkEvent {
  int rank = -1;         // training rank, -1 when unknown
  std::string node;      // trace node id as the reader shows it ("algo-1-0"); may be empty
  std::string phase;     // process name: "Step:ModeKeys.TRAIN", "Forward-SubModuleInternal", ...
  std::string name;      // event name: the step phase again, a module path, an op...
  int64_t startUs = 0;   // µs since the epoch
  int64_t endUs = 0;     // µs since the epoch, >= startUs
  int64_t step = -1;     // args.step_num, -1 when absent
  int64_t pid = -1;      // args.pid (data-loader worker pid), -1 when absent
  bool horovodTimeline = false;  // from a *_horovod_timeline.json file (reader file_type "")
  std::vector<std::pair<std::string, std::string>> args;  // any other args, as strings

  int64_t durationUs() const { return endUs - startUs; }
  // The value of args[key], or nullptr.
  const std::string* arg(const std::string& key) const {
    for (const auto& kv : args)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
};

// One scan window handed to metric rules. The vectors are valid during the call only.
struct MetricWindow {
  int64_t index = 0;    // 0, 1, 2... from the first window
  int64_t startUs = 0;  // window start, µs since the epoch
  int64_t endUs = 0;    // window end (start + scan_interval_us)
  const std::vector<SystemSample>* samples = nullptr;   // in time order (file order in compat)
  const std::vector<FrameworkEvent>* events = nullptr;  // in start-time order
  bool last = false;    // no more data will come (offline end or job end marker)
};

// ---------------------------------------------------------------------------------------------
// Tensor inputs (debugger output; specs/smdebug.md §1)

using strata::Mode;  // strata/types.h
using strata::modeName;

struct StepInfo {
  int64_t step = 0;      // global step
  Mode mode = Mode::kGlobal;
  int64_t modeStep = 0;  // step within its mode
  double wallTimeSec = std::numeric_limits<double>::quiet_NaN();  // when it was written, if known
};

// A tensor's value at one step, converted to double, C order.
struct TensorValue {
  std::vector<int64_t> shape;
  std::vector<double> data;
  size_t numel() const { return data.size(); }
};

// A read-only view of a tensor trial. Implementations: the debugger's trial reader (adapter in
// rules/sources/), rules::MemoryTrial (tests, examples). Only called from the engine thread.
class Trial {
 public:
  virtual ~Trial() = default;
  // Collection names present in the trial.
  virtual std::vector<std::string> collections() const = 0;
  // Tensor names of a collection ("" = every tensor of the trial).
  virtual std::vector<std::string> tensorNames(const std::string& collection = "") const = 0;
  // Whether the run's collection holds tensors on some worker. Rules that fall back to names
  // when a collection is empty ask this: a trial of one rank's data (the in-process engine of
  // a pipeline stage) knows that some collections are filled on other ranks.
  virtual bool collectionHasTensors(const std::string& collection) const { return !tensorNames(collection).empty(); }
  // Complete steps, in increasing global-step order.
  virtual std::vector<StepInfo> steps() const = 0;
  virtual bool hasTensor(const std::string& name, int64_t step) const = 0;
  // The value, or nullopt when the tensor was not saved raw at that step.
  virtual std::optional<TensorValue> value(const std::string& name, int64_t step) const = 0;
  // A stored reduction ("mean", "variance", "l2"... with abs), or nullopt. Rules fall back
  // to computing it from value().
  virtual std::optional<double> reduction(const std::string& /*name*/, int64_t /*step*/,
                                          const std::string& /*op*/, bool /*abs*/) const {
    return std::nullopt;
  }
  // Wall-clock time (s since the epoch) of the newest data, if known.
  virtual std::optional<double> lastUpdateSec() const { return std::nullopt; }
  // The training job has ended (training_job_end.ts seen): no more steps will come.
  virtual bool finished() const = 0;
  // Whether some complete step has `mode`. The default scans steps(); long-lived trials
  // answer without the copy.
  virtual bool hasMode(Mode mode) const {
    for (const StepInfo& s : steps())
      if (s.mode == mode) return true;
    return false;
  }
  // Complete steps after global step `step`, in order (the engine's "what is new").
  virtual std::vector<StepInfo> stepsAfter(int64_t step) const {
    std::vector<StepInfo> out;
    for (const StepInfo& s : steps())
      if (s.step > step) out.push_back(s);
    return out;
  }
};

// ---------------------------------------------------------------------------------------------
// Outputs

// Rule status, as SageMaker's RuleEvaluationStatus, plus NoData: the rule's inputs never
// arrived (GPU metrics on a CPU-only run, a collection that was not saved), so it could not
// look for issues at all. "No data" is not "no issues".
enum class RuleStatus { kInProgress, kIssuesFound, kNoIssuesFound, kError, kNoData };
inline const char* statusName(RuleStatus s) {
  switch (s) {
    case RuleStatus::kInProgress: return "InProgress";
    case RuleStatus::kIssuesFound: return "IssuesFound";
    case RuleStatus::kNoIssuesFound: return "NoIssuesFound";
    case RuleStatus::kError: return "Error";
    case RuleStatus::kNoData: return "NoData";
  }
  return "?";
}

// One time a rule's condition held: what, where, and the numbers that tripped it.
struct Finding {
  std::string rule;                   // filled in by the engine when left empty
  std::string message;                // one line with the numbers
  int64_t step = -1;                  // tensor rules: the global step
  int64_t timestampUs = -1;           // metric rules: the end of the window
  std::vector<std::string> subjects;  // tensors, "algo-1/gpu0", "rank 3"...
  nlohmann::json details = nlohmann::json::object();

  nlohmann::json toJson() const {
    nlohmann::json j = {{"rule", rule}, {"message", message}, {"subjects", subjects},
                        {"details", details}};
    if (step >= 0) j["step"] = step;
    if (timestampUs >= 0) j["timestamp_us"] = timestampUs;
    return j;
  }
};

// The reference report shape (rule-output/<Rule>.json): RuleTriggered, Violations, Details,
// Datapoints, RuleParameters ("key:value" lines).
struct RuleReport {
  int64_t ruleTriggered = 0;
  int64_t violations = 0;
  int64_t datapoints = 0;
  nlohmann::json details = nlohmann::json::object();
  std::string ruleParameters;

  nlohmann::json toJson() const {
    return {{"RuleTriggered", ruleTriggered}, {"Violations", violations}, {"Details", details},
            {"Datapoints", datapoints}, {"RuleParameters", ruleParameters}};
  }
};

// ---------------------------------------------------------------------------------------------
// The rule interface

class Rule {
 public:
  enum class Input { kTensors, kMetrics };

  virtual ~Rule() = default;
  virtual std::string name() const = 0;
  virtual Input input() const = 0;

  // Tensor rules: called once per complete step, in increasing step order.
  virtual std::vector<Finding> invokeAtStep(const Trial& /*trial*/, const StepInfo& /*step*/) {
    return {};
  }
  // Metric rules: called once per scan window, in window order (empty windows included).
  virtual std::vector<Finding> invokeForWindow(const MetricWindow& /*window*/) { return {}; }
  // Every engine poll, with the wall clock (s since the epoch); for time-based rules such as
  // StalledTrainingRule. `trial` is null when the run has no tensor data.
  virtual std::vector<Finding> onTick(const Trial* /*trial*/, double /*nowSec*/) { return {}; }
  // The data has ended. Last chance to report.
  virtual std::vector<Finding> finish() { return {}; }

  // The reference-shaped report. nullopt: the engine writes its own counts (RuleTriggered =
  // invocations with findings, Violations = findings, Datapoints = invocations).
  virtual std::optional<RuleReport> report() const { return std::nullopt; }

  // Why the rule could not evaluate anything so far, when the inputs it needs never arrived
  // ("no GPU utilisation samples: a CPU-only host"); nullopt when it had data. A rule that
  // ends with a reason and no finding gets status NoData. The engine also reports NoData for
  // a rule it never invoked.
  virtual std::optional<std::string> missingData() const { return std::nullopt; }
};

// Creates a rule from its parameters (a JSON object, values as given in the config). Throws
// std::exception with a message on bad parameters.
using RuleFactory = std::function<std::unique_ptr<Rule>(const nlohmann::json& params)>;

// Registers a custom rule under `name`, so a config can name it like a built-in. Call before
// the engine is built (e.g. from a static initialiser, see STRATA_REGISTER_RULE). Throws when
// `name` is already taken. Thread-safe.
void registerRule(const std::string& name, RuleFactory factory);

#define STRATA_RULES_CONCAT_INNER(a, b) a##b
#define STRATA_RULES_CONCAT(a, b) STRATA_RULES_CONCAT_INNER(a, b)
// STRATA_REGISTER_RULE("MyRule", [](const nlohmann::json& p) { return std::make_unique<MyRule>(p); });
#define STRATA_REGISTER_RULE(name, factory)                                                \
  static const bool STRATA_RULES_CONCAT(strataRuleRegistered_, __LINE__) = [] {            \
    ::strata::rules::registerRule(name, factory);                                          \
    return true;                                                                           \
  }()

// ---------------------------------------------------------------------------------------------
// Rules in shared libraries
//
// A config entry {"name": "MyRule", "library": "/path/libmyrules.so", "parameters": {...}}
// makes the engine dlopen() the library and call its two C entry points:
//
//   int strata_rules_abi_version(void);             // must return STRATA_RULES_ABI_VERSION
//   strata::rules::Rule* strata_create_rule(const char* name, const char* params_json,
//                                           char* error, size_t error_size);
//
// strata_create_rule returns a new rule (owned by the engine, deleted through Rule's virtual
// destructor) or nullptr with a NUL-terminated message in `error`. STRATA_RULE_PLUGIN defines
// both from a factory `std::unique_ptr<Rule> f(const std::string& name, const nlohmann::json&)`.
// 2: RuleStatus::kNoData, Rule::missingData(), Trial::hasMode()/stepsAfter(), StopSignal's step.
#define STRATA_RULES_ABI_VERSION 2

#define STRATA_RULE_PLUGIN(factory)                                                           \
  extern "C" __attribute__((visibility("default"))) int strata_rules_abi_version(void) {      \
    return STRATA_RULES_ABI_VERSION;                                                          \
  }                                                                                           \
  extern "C" __attribute__((visibility("default"))) ::strata::rules::Rule* strata_create_rule( \
      const char* name, const char* paramsJson, char* error, size_t errorSize) {              \
    try {                                                                                     \
      return (factory)(std::string(name), nlohmann::json::parse(paramsJson)).release();       \
    } catch (const std::exception& e) {                                                       \
      if (error != nullptr && errorSize > 0) {                                                \
        std::snprintf(error, errorSize, "%s", e.what());                                      \
      }                                                                                       \
      return nullptr;                                                                         \
    }                                                                                         \
  }

// ---------------------------------------------------------------------------------------------
// StopTraining

// The StopTraining action's flag. A rule engine running inside the training process sets it;
// the runtime polls requested() at step boundaries (strata::should_stop()) and must agree on it
// across ranks (e.g. an allreduce of the flag) so every rank stops at the same step.
// A separate `strata rules RUN_DIR --watch` process cannot reach the flag: it writes the stop
// file instead (stopFilePath), which the runtime's rank 0 polls with stopFileExists().
class StopSignal {
 public:
  // The process-wide signal.
  static StopSignal& global();

  // Asks training to stop. The first request's rule, reason and step (the global step whose
  // data showed the issue, -1 when not a step's) are kept. Thread-safe.
  void request(const std::string& rule, const std::string& reason, int64_t step = -1);
  // Lock-free; cheap enough for every step.
  bool requested() const { return requested_.load(std::memory_order_acquire); }
  std::string rule() const;
  std::string reason() const;
  int64_t step() const;
  // Clears the flag (tests; a new run in the same process).
  void reset();

  // <runDir>/rule-output/stop_training.json: {"rule": ..., "reason": ..., "step": ...}.
  static std::string stopFilePath(const std::string& runDir);
  static bool stopFileExists(const std::string& runDir);
  // Writes the stop file atomically (temp file + rename). Returns false on I/O error.
  static bool writeStopFile(const std::string& runDir, const std::string& rule,
                            const std::string& reason, int64_t step = -1);

 private:
  std::atomic<bool> requested_{false};
  mutable std::mutex mu_;
  std::string rule_;
  std::string reason_;
  int64_t step_ = -1;
};

}  // namespace strata::rules
