#include "checkpoint/background_writer.h"

#include <pthread.h>
#include <signal.h>

#include "core/errors.h"
#include "core/logging.h"

namespace strata::checkpoint {
namespace {

// Stop signals go to the training thread (runtime/signals.h), never to the writer.
void blockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

}  // namespace

BackgroundWriter::BackgroundWriter(std::string threadName) : threadName_(std::move(threadName)) {}

BackgroundWriter::~BackgroundWriter() { shutdown(); }

void BackgroundWriter::submit(Job job, int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  STRATA_CHECK(!stopped_ && !stopping_, "checkpoint step ", step, ": the background writer has been shut down");
  STRATA_CHECK(!busy_, "checkpoint step ", step, ": the background write of step ", step_,
               " is still in flight (wait for it first)");
  job_ = std::move(job);
  step_ = step;
  busy_ = true;
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  cv_.notify_all();
}

std::optional<PublishResult> BackgroundWriter::wait(std::chrono::milliseconds logEvery) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto start = std::chrono::steady_clock::now();
  while (busy_) {
    if (cv_.wait_for(lock, logEvery, [this] { return !busy_; })) break;
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start);
    STRATA_LOG(kWarn, kInit, "checkpoint step ", step_, ": still waiting for its background write after ",
               waited.count(), " s");
  }
  std::optional<PublishResult> out;
  out.swap(result_);
  return out;
}

bool BackgroundWriter::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

int64_t BackgroundWriter::stepInFlight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_ ? step_ : -1;
}

void BackgroundWriter::shutdown() noexcept {
  try {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stopped_) return;
      cv_.wait(lock, [this] { return !busy_; });
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kInit, "checkpoint writer shutdown: ", e.what());
  }
}

void BackgroundWriter::run() {
  pthread_setname_np(pthread_self(), threadName_.substr(0, 15).c_str());
  blockStopSignals();
  for (;;) {
    Job job;
    int64_t step = -1;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || static_cast<bool>(job_); });
      if (!job_) return;  // stopping, nothing left
      job.swap(job_);
      step = step_;
    }
    PublishResult result;
    try {
      result = job();
    } catch (const std::exception& e) {
      result.ok = false;
      result.step = step;
      result.error = e.what();
    } catch (...) {
      result.ok = false;
      result.step = step;
      result.error = "unknown exception";
    }
    job = nullptr;  // drop what the job captured before announcing the end
    {
      std::lock_guard<std::mutex> lock(mu_);
      result_ = std::move(result);
      busy_ = false;
    }
    cv_.notify_all();
  }
}

}  // namespace strata::checkpoint
