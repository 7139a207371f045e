#include "rules/online_engine.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/logging.h"
#include "rules/builtin.h"

namespace strata::rules {
namespace {

namespace fs = std::filesystem;

double threadCpuSec() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double wallSec() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The engine's view of the trial the feed fills.
class OnlineTensorSource final : public TensorSource {
 public:
  explicit OnlineTensorSource(size_t retain) : trial_(retain) {}
  void refresh() override {}  // the engine's thread drains the feed before each poll
  const Trial& trial() const override { return trial_; }
  OnlineTrial& mutableTrial() { return trial_; }

 private:
  OnlineTrial trial_;
};

int64_t integerParam(const nlohmann::json& params, const char* key, int64_t def) {
  auto it = params.find(key);
  if (it == params.end() || it->is_null()) return def;
  try {
    if (it->is_number()) return it->get<int64_t>();
    if (it->is_string()) return std::stoll(it->get<std::string>());
  } catch (const std::exception&) {
  }
  return def;  // the rule's own parameter check reports it
}

}  // namespace

std::vector<RuleSpec> inProcessSpecs(const std::vector<RuleSpec>& specs, bool compat) {
  std::vector<RuleSpec> out;
  for (const RuleSpec& spec : specs) {
    EngineOptions eo;
    eo.compat = compat;
    Engine probe(eo);
    RuleSpec bare = spec;
    bare.actions = nlohmann::json::array();
    probe.addRules({bare});
    if (!probe.needsTensors() || probe.needsMetrics()) continue;
    RuleSpec s = spec;
    s.actions = nlohmann::json::array();
    if (spec.actions.is_array())
      for (const auto& a : spec.actions)
        if (a.is_string() && a.get<std::string>() == "StopTraining") s.actions.push_back(a);
    out.push_back(std::move(s));
  }
  return out;
}

size_t retainedStepsFor(const std::vector<RuleSpec>& specs) {
  int64_t need = 2;  // the current step and the one before
  for (const RuleSpec& s : specs) {
    if (!s.library.empty() || !isBuiltinRule(s.name)) {
      need = std::max<int64_t>(need, 4);
    } else if (s.name == "UnchangedTensor") {
      need = std::max(need, integerParam(s.parameters, "num_steps", 3));
    } else if (s.name == "WeightUpdateRatio") {
      need = std::max(need, integerParam(s.parameters, "num_steps", 1) + 1);
    }
  }
  return static_cast<size_t>(std::clamp<int64_t>(need, 2, static_cast<int64_t>(kMaxRetainedSteps)));
}

OnlineEngine::OnlineEngine(const std::vector<RuleSpec>& specs, OnlineEngineOptions options)
    : options_(std::move(options)), feed_(std::make_shared<StepFeed>(options_.maxQueuedBytes)) {
  EngineOptions eo;
  eo.compat = options_.compat;  // runDir stays empty: rank 0's engine over the files is the record
  engine_ = std::make_unique<Engine>(eo);
  engine_->addRules(specs);
  auto source = std::make_unique<OnlineTensorSource>(retainedStepsFor(specs));
  trial_ = &source->mutableTrial();
  trial_->setFilledElsewhere(options_.collectionsFilledElsewhere);
  engine_->setTensorSource(std::move(source));
  if (!options_.runDir.empty()) {
    std::error_code ec;
    fs::create_directories(fs::path(options_.runDir) / "rule-output" / "online", ec);
    // A fresh record for this run (an earlier run in the same folder may have left one).
    createOutputFile((fs::path(options_.runDir) / "rule-output" / "online" / (options_.worker + ".jsonl")).string());
    std::ofstream(fs::path(options_.runDir) / "rule-output" / "online" / (options_.worker + ".jsonl"),
                  std::ios::trunc);
  }
  summary_ = engine_->summary();
  thread_ = std::thread([this] { loop(); });
}

OnlineEngine::~OnlineEngine() { stop(); }

void OnlineEngine::loop() {
  pthread_setname_np(pthread_self(), "strata-rules");
  while (!stopping_.load()) {
    feed_->waitForWork(options_.tickInterval);
    if (stopping_.load()) break;
    evaluate();
  }
  try {
    evaluate();  // what was queued before stop()
    trial_->setFinished(true);
    record(engine_->finish());
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kRules, "online rules: finishing failed: ", e.what());
  }
  auto summary = engine_->summary();
  std::lock_guard<std::mutex> lock(mu_);
  summary_ = std::move(summary);
}

void OnlineEngine::evaluate() {
  try {
    const double cpu0 = threadCpuSec();
    const size_t steps = feed_->drainInto(*trial_, wallSec());
    std::vector<Finding> findings = engine_->poll();
    trial_->evict();  // only now: every drained step has been evaluated
    const double cpu = threadCpuSec() - cpu0;
    record(findings);
    std::lock_guard<std::mutex> lock(mu_);
    if (steps > 0) {
      if (stats_.stepsEvaluated == 0) {
        stats_.firstEvaluationCpuSec = cpu;
        stats_.firstEvaluationSteps = static_cast<int64_t>(steps);
      }
      stats_.stepsEvaluated += static_cast<int64_t>(steps);
      stats_.cpuSec += cpu;
      stats_.maxStepCpuSec = std::max(stats_.maxStepCpuSec, cpu / static_cast<double>(steps));
    }
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kRules, "online rules: evaluation failed: ", e.what());
  }
}

void OnlineEngine::record(const std::vector<Finding>& findings) {
  if (findings.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.findings += static_cast<int64_t>(findings.size());
  }
  if (options_.runDir.empty()) return;
  std::ofstream out(fs::path(options_.runDir) / "rule-output" / "online" / (options_.worker + ".jsonl"),
                    std::ios::app);
  for (const Finding& f : findings) {
    nlohmann::json j = f.toJson();
    j["worker"] = options_.worker;
    out << j.dump() << "\n";
  }
}

namespace {
// CPU per step once the first evaluation's one-time costs are paid (0 without later steps).
double steadyCpuPerStepUs(const OnlineEngine::Stats& s) {
  const int64_t later = s.stepsEvaluated - s.firstEvaluationSteps;
  return later > 0 ? (s.cpuSec - s.firstEvaluationCpuSec) / static_cast<double>(later) * 1e6 : 0.0;
}
}  // namespace

void OnlineEngine::writeStats() const {
  if (options_.runDir.empty()) return;
  const Stats s = stats();
  nlohmann::json rules = nlohmann::json::array();
  for (const RuleSummary& r : summary()) rules.push_back(r.toJson());
  const nlohmann::json j = {
      {"worker", options_.worker},
      {"steps_evaluated", s.stepsEvaluated},
      {"findings", s.findings},
      {"engine_cpu_s", s.cpuSec},
      {"engine_cpu_per_step_us", s.stepsEvaluated > 0 ? s.cpuSec / static_cast<double>(s.stepsEvaluated) * 1e6 : 0.0},
      {"engine_cpu_max_step_us", s.maxStepCpuSec * 1e6},
      {"engine_cpu_first_evaluation_us", s.firstEvaluationCpuSec * 1e6},
      {"first_evaluation_steps", s.firstEvaluationSteps},
      {"engine_cpu_per_step_after_first_us", steadyCpuPerStepUs(s)},
      {"tap_tensors", s.feed.tensors},
      {"tap_scalars", s.feed.scalars},
      {"tap_steps", s.feed.steps},
      {"tap_dropped_tensors", s.feed.droppedTensors},
      {"tap_late_items", s.feed.lateItems},
      {"tap_training_thread_us", static_cast<double>(s.feed.producerNs) / 1e3},
      {"rules", rules}};
  createOutputFile((fs::path(options_.runDir) / "rule-output" / "online" / (options_.worker + ".json")).string());
  std::ofstream(fs::path(options_.runDir) / "rule-output" / "online" / (options_.worker + ".json"))
      << j.dump(1) << "\n";
}

void OnlineEngine::stop() {
  if (stopped_.exchange(true)) return;
  stopping_.store(true);
  feed_->wake();
  if (thread_.joinable()) thread_.join();
  const Stats s = stats();
  STRATA_LOG(kInfo, kRules, "online rules (", options_.worker, "): ", s.stepsEvaluated, " step(s) evaluated, ",
             s.findings, " finding(s), ",
             s.stepsEvaluated > 0 ? s.cpuSec / static_cast<double>(s.stepsEvaluated) * 1e6 : 0.0,
             " us of engine CPU per step, ", static_cast<double>(s.feed.producerNs) / 1e3,
             " us in the training thread's tap overall");
  try {
    writeStats();
  } catch (const std::exception& e) {
    STRATA_LOG(kWarn, kRules, "online rules: cannot write the stats: ", e.what());
  }
}

OnlineEngine::Stats OnlineEngine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  s.feed = feed_->stats();
  return s;
}

std::vector<RuleSummary> OnlineEngine::summary() const {
  std::lock_guard<std::mutex> lock(mu_);
  return summary_;
}

}  // namespace strata::rules
