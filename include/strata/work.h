// Work: the handle of an asynchronous collective or point-to-point operation.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace strata {

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
};

}  // namespace strata
