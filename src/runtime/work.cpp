#include "strata/work.h"

#include <time.h>

#include "core/errors.h"

namespace strata {
namespace {

// CLOCK_THREAD_CPUTIME_ID has no vDSO fast path: two system calls per asynchronous operation
// (1.3 us each on the bench VM), paid only on the communication thread's queued path, where the
// hand-off to that thread already costs more; the inline fast path of synchronous calls
// creates no Work. (If small asynchronous collectives ever matter, read the thread's clock
// once per step from the reducer instead, via pthread_getcpuclockid.)
std::chrono::nanoseconds threadCpuNow() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

}  // namespace

WaitCount::WaitCount(std::atomic<int>* counter) : counter_(counter) {
  if (counter_) counter_->fetch_add(1, std::memory_order_relaxed);
}

WaitCount::~WaitCount() {
  if (counter_) counter_->fetch_sub(1, std::memory_order_relaxed);
}

bool Work::isCompleted() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void Work::wait(std::chrono::milliseconds timeout) {
  WaitCount counted(waiters_.get());
  std::unique_lock<std::mutex> lock(mu_);
  if (timeout == std::chrono::milliseconds::max()) {
    cv_.wait(lock, [this] { return done_; });
  } else if (!cv_.wait_for(lock, timeout, [this] { return done_; })) {
    STRATA_THROW(TimeoutError, "asynchronous operation did not complete within ", timeout.count(), " ms");
  }
  if (error_) std::rethrow_exception(error_);
}

std::exception_ptr Work::exception() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

std::chrono::nanoseconds Work::runTime() {
  std::lock_guard<std::mutex> lock(mu_);
  return runTime_;
}

std::chrono::nanoseconds Work::cpuTime() {
  std::lock_guard<std::mutex> lock(mu_);
  return cpuTime_;
}

void Work::markStarted() {
  std::lock_guard<std::mutex> lock(mu_);
  started_ = std::chrono::steady_clock::now();
  startedOn_ = std::this_thread::get_id();
  cpuStarted_ = threadCpuNow();
}

void Work::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_.time_since_epoch().count() != 0) runTime_ = std::chrono::steady_clock::now() - started_;
    if (startedOn_ == std::this_thread::get_id()) cpuTime_ = threadCpuNow() - cpuStarted_;
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

}  // namespace strata
