#include "rules/runner.h"

#include "core/logging.h"

namespace strata::rules {

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
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, interval_, [this] { return wake_ || stopping_; });
      wake_ = false;
      if (stopping_) break;
    }
    try {
      engine_->poll();
    } catch (const std::exception& e) {
      STRATA_LOG(kError, kRules, "rule engine poll failed: ", e.what());
    }
    auto s = engine_->summary();
    std::lock_guard<std::mutex> lock(mu_);
    summary_ = std::move(s);
  }
  try {
    engine_->finish();
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kRules, "rule engine finish failed: ", e.what());
  }
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
