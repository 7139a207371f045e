#include "rules/runner.h"

#include <pthread.h>

#include "core/logging.h"

namespace strata::rules {
namespace {

// Runs one engine pass; a failure is logged, not thrown (the rules never stop the training).
template <typename Pass>
void logFailure(const char* what, Pass pass) {
  try {
    pass();
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kRules, "rule engine ", what, " failed: ", e.what());
  }
}

}  // namespace

RuleRunner::RuleRunner(std::unique_ptr<Engine> engine, std::chrono::milliseconds interval)
    : engine_(std::move(engine)), interval_(interval) {
  thread_ = std::thread([this] { loop(); });
}

RuleRunner::~RuleRunner() { stop(); }

void RuleRunner::notifyStep(int64_t) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = true;
  }
  cv_.notify_one();
}

void RuleRunner::loop() {
  pthread_setname_np(pthread_self(), "strata-online");
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, interval_, [this] { return wake_ || stopping_; });
      wake_ = false;
      if (stopping_) break;
    }
    logFailure("poll", [this] { engine_->poll(); });
    publishSummary();
  }
  logFailure("finish", [this] { engine_->finish(); });
  publishSummary();
}

void RuleRunner::publishSummary() {
  auto s = engine_->summary();
  std::lock_guard<std::mutex> lock(mu_);
  summary_ = std::move(s);
}

void RuleRunner::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

std::vector<RuleSummary> RuleRunner::summary() const {
  std::lock_guard<std::mutex> lock(mu_);
  return summary_;
}

}  // namespace strata::rules
