// Runs an Engine on a background thread while training goes on (online mode on rank 0).
// The training loop calls notifyStep() at step boundaries, which only wakes the thread: rule
// work never runs on the training thread. Findings with a StopTraining action set
// StopSignal::global(), which the runtime polls.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "rules/engine.h"

namespace strata::rules {

class RuleRunner {
 public:
  // Starts the thread. It polls the engine when notified and at least every `interval`.
  RuleRunner(std::unique_ptr<Engine> engine, std::chrono::milliseconds interval = std::chrono::seconds(5));
  ~RuleRunner();  // stop()
  RuleRunner(const RuleRunner&) = delete;
  RuleRunner& operator=(const RuleRunner&) = delete;

  // Non-blocking: asks for a poll soon. Thread-safe.
  void notifyStep(int64_t step);
  // Final poll, Engine::finish() (writes rule-output/), joins the thread. Idempotent.
  // Call after the training loop ended and the writers flushed their files.
  void stop();
  // A snapshot of the rules' state. Thread-safe.
  std::vector<RuleSummary> summary() const;

 private:
  void loop();
  // Copies the engine's summary to what summary() returns.
  void publishSummary();

  std::unique_ptr<Engine> engine_;
  std::chrono::milliseconds interval_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool wake_ = false;
  bool stopping_ = false;
  bool stopped_ = false;
  std::vector<RuleSummary> summary_;
  std::thread thread_;
};

}  // namespace strata::rules
