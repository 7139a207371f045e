// The thread that writes asynchronous checkpoints: one named thread ("strata-ckpt") per
// owner, one job at a time. The owner submits a job when the writer is idle and waits for it
// before the next one (at most one write in flight: the job reads buffers the owner refills
// at the next save).
//
// Threading: every method is thread-safe (the training thread submits and waits; finalize
// may wait and shut down from another). Exceptions never escape the thread: a job that
// throws becomes a failed PublishResult. SIGTERM and SIGINT are blocked on the thread, so
// they reach the training thread's handlers and never interrupt the writer's system calls.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "checkpoint/async_publish.h"

namespace strata::checkpoint {

class BackgroundWriter {
 public:
  using Job = std::function<PublishResult()>;

  explicit BackgroundWriter(std::string threadName = "strata-ckpt");
  // shutdown(): waits for the job in flight, joins. Never throws.
  ~BackgroundWriter();
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  // Starts `job` (the thread is created on first use). Throws strata::Error when a job is
  // still in flight (call wait() first) or after shutdown().
  void submit(Job job, int64_t step);
  // Blocks until no job is in flight. Returns the result of the job that finished since the
  // last call (each result is returned once), or nullopt. Logs a warning every
  // `logEvery` while it waits; the job's own waits are bounded, its disk writes are not.
  std::optional<PublishResult> wait(std::chrono::milliseconds logEvery = std::chrono::milliseconds(30000));
  // Whether a job is in flight.
  bool busy() const;
  // The step of the job in flight, or -1.
  int64_t stepInFlight() const;
  // Waits for the job in flight and joins the thread; keeps the unclaimed result for
  // wait(). Idempotent; never throws.
  void shutdown() noexcept;

 private:
  void run();

  const std::string threadName_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  Job job_;                // set by submit, taken by the thread
  int64_t step_ = -1;      // of the job in flight
  bool busy_ = false;      // a job is submitted and not finished
  bool stopping_ = false;
  bool stopped_ = false;
  std::optional<PublishResult> result_;  // finished, not yet returned by wait()
};

}  // namespace strata::checkpoint
