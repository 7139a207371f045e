// Work: the handle of an asynchronous collective or point-to-point operation.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace strata {

// Counts the current thread in `counter` (if not null) for as long as it lives: a thread
// that waits for a collective (or runs one itself) and so computes nothing meanwhile.
class WaitCount {
 public:
  explicit WaitCount(std::atomic<int>* counter);
  ~WaitCount();
  WaitCount(const WaitCount&) = delete;
  WaitCount& operator=(const WaitCount&) = delete;

 private:
  std::atomic<int>* counter_;
};

// Thread-safe. wait() may be called from any thread, any number of times.
class Work {
 public:
  virtual ~Work() = default;
  // Whether the operation finished (successfully or not). Never throws, never blocks.
  virtual bool isCompleted();
  // Blocks until the operation finished; rethrows the error it hit. Throws
  // strata::TimeoutError if it has not finished within `timeout` (the operation
  // itself carries on and fails by its own timeout if a peer is gone).
  virtual void wait(std::chrono::milliseconds timeout = std::chrono::milliseconds::max());
  // The error the operation hit, or nullptr (also while it runs).
  std::exception_ptr exception();

  // How long the operation itself ran (on the communication thread), once completed.
  std::chrono::nanoseconds runTime();
  // The CPU time the running thread spent on it, once completed (0 when it was started and
  // finished on different threads). Below runTime() when that thread was descheduled, e.g.
  // sharing a core with the training thread, or slept in a wait.
  std::chrono::nanoseconds cpuTime();

  // Called by the executor: when the operation starts running, and once when it ends.
  void markStarted();
  void finish(std::exception_ptr error);
  // Called by the executor before handing the Work out: wait() counts itself in `waiters`
  // while it blocks, so the thread running the operation knows whether the caller's core
  // is otherwise idle (collectives/shm_domain.h).
  void countWaitsIn(std::shared_ptr<std::atomic<int>> waiters) { waiters_ = std::move(waiters); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::chrono::steady_clock::time_point started_{};
  std::chrono::nanoseconds runTime_{0};
  std::chrono::nanoseconds cpuStarted_{0};
  std::thread::id startedOn_{};
  std::chrono::nanoseconds cpuTime_{0};
  std::shared_ptr<std::atomic<int>> waiters_;
};

}  // namespace strata
