// The in-process rule engine of one rank: the job's tensor rules, evaluated on this rank's
// debugger data in memory (rules/step_feed.h) as each step completes, on a light thread
// ("strata-rules"), so a StopTraining verdict reaches strata::should_stop() within a step or
// two instead of after the files were written and polled.
//
// Which rank evaluates what: the offline reader takes a tensor's value from the first worker
// (by name) that saved it, so each rank evaluates the tensors it is that first worker for:
// rank 0 in data parallelism (every rank saves the same names), the first replica of each
// stage in a pipeline (each stage saves its own parameters, the last one the loss). The
// runtime decides (runtime/online_rules.h); verdicts then match `strata rules` on the files.
//
// Profiler rules are not run here: they need every rank's timeline and the hosts' samples,
// which rank 0's engine over the files has (rules/online.h). That engine also remains the
// record (rule-output/) and runs every action; this one takes only StopTraining, and writes
// its own findings and cost to rule-output/online/<worker>.jsonl and .json.
//
// Threading: the constructor starts the thread; feed() is handed to the debugger hook;
// stop() and stats() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rules/engine.h"
#include "rules/step_feed.h"

namespace strata::rules {

struct OnlineEngineOptions {
  std::string runDir;  // rule-output/online/<worker>.* are written under it ("": nothing)
  std::string worker = "worker_0";
  bool compat = false;
  // How often the thread wakes without a completed step (time-based rules: StalledTraining).
  std::chrono::milliseconds tickInterval{1000};
  size_t maxQueuedBytes = kDefaultFeedBytes;
  // Collections filled by other ranks (OnlineTrial::setFilledElsewhere).
  std::vector<std::string> collectionsFilledElsewhere;
};

// The specs that run in process: the tensor rules of `specs`, with StopTraining as their only
// action (StalledTrainingRule's stop_training_on_fire is kept). Throws strata::ConfigError
// for a rule that cannot be built.
std::vector<RuleSpec> inProcessSpecs(const std::vector<RuleSpec>& specs, bool compat);

// How many saved steps of each tensor the in-process trial keeps for `specs`: what the rules
// look back over (UnchangedTensor's num_steps, WeightUpdateRatio's previous step or num_steps
// + 1; 4 for custom rules), at least 2, at most kMaxRetainedSteps. Pure.
inline constexpr size_t kMaxRetainedSteps = 256;
size_t retainedStepsFor(const std::vector<RuleSpec>& specs);

class OnlineEngine {
 public:
  // `specs`: as returned by inProcessSpecs. Throws strata::ConfigError on bad rules.
  OnlineEngine(const std::vector<RuleSpec>& specs, OnlineEngineOptions options);
  ~OnlineEngine();  // stop()
  OnlineEngine(const OnlineEngine&) = delete;
  OnlineEngine& operator=(const OnlineEngine&) = delete;

  // What the debugger hook hands its data to (debugger::setStepTap).
  std::shared_ptr<StepFeed> feed() const { return feed_; }
  // Evaluates what is queued, finishes the rules, writes the stats, joins. Idempotent.
  void stop();

  struct Stats {
    int64_t stepsEvaluated = 0;
    int64_t findings = 0;
    double cpuSec = 0;          // the thread's CPU time spent evaluating steps
    double maxStepCpuSec = 0;   // the largest per-step share of one evaluation
    // The first evaluation that saw steps pays one-time costs (regexes compiled, rules'
    // state allocated): kept apart so the steady per-step cost is visible in short runs.
    double firstEvaluationCpuSec = 0;
    int64_t firstEvaluationSteps = 0;
    StepFeed::Stats feed;
  };
  Stats stats() const;
  std::vector<RuleSummary> summary() const;

 private:
  void loop();
  void evaluate();  // engine thread
  void record(const std::vector<Finding>& findings);
  void writeStats() const;

  OnlineEngineOptions options_;
  std::shared_ptr<StepFeed> feed_;
  OnlineTrial* trial_ = nullptr;  // owned by the engine's tensor source
  std::unique_ptr<Engine> engine_;
  mutable std::mutex mu_;  // stats_ and summary_
  Stats stats_;
  std::vector<RuleSummary> summary_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> stopped_{false};
  std::thread thread_;
};

}  // namespace strata::rules
