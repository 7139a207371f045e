// Asynchronous checkpoints ("checkpoint": {"async": true}): at the step boundary the training
// thread copies the state into reused CPU buffers (StateSnapshot) and hands the copies to the
// checkpoint thread ("strata-ckpt"), which serialises and writes them and publishes the
// checkpoint with every rank through the store (checkpoint/async_publish.h) while training
// goes on. At most one write is in flight: the next save waits for the previous one first
// (the wait is timed, logged and counted in CheckpointStats, and shows on the profiler's
// checkpoint track) and throws on every rank if that write failed.
//
// Internal to the adapter; CheckpointManager owns one. Threading: save()/wait() on the
// training thread (collective: every rank calls them in the same order); stats() from any
// thread; settle()/shutdown() from the training thread or finalize.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "adapter/checkpoint/checkpoint_state.h"
#include "checkpoint/background_writer.h"
#include "strata/checkpoint.h"

namespace strata::detail {

struct AsyncSaveRequest {
  std::string root;  // checkpoint.dir
  int64_t step = 0;
  int64_t epoch = 0;
  int keep = 0;
  bool partial = false;
  DistributedSampler* sampler = nullptr;
};

class AsyncCheckpointer {
 public:
  AsyncCheckpointer() = default;
  // shutdown(). Never throws.
  ~AsyncCheckpointer();
  AsyncCheckpointer(const AsyncCheckpointer&) = delete;
  AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;

  // Collective. Waits for the write in flight (throwing on every rank if it failed), copies
  // the state and starts writing it in the background. Returns the checkpoint's directory
  // (complete once the write is published: wait()).
  std::string save(const AsyncSaveRequest& request, DistributedModel& model, DistributedOptimizer& optimizer);
  // Collective. Waits for the write in flight; throws strata::Error on every rank when it
  // failed on any. A no-op when nothing is in flight.
  void wait();
  // Not collective, never throws: waits for the write in flight; a failure nobody collected
  // is logged (ERROR, with the rank) and remembered in failedUnreported().
  void settle() noexcept;
  // settle(), then joins the thread (finalize). Idempotent.
  void shutdown() noexcept;
  bool failedUnreported() const { return failedUnreported_.load(); }

  // Thread-safe.
  CheckpointStats stats() const;
  // A timing the manager measured itself (a synchronous save).
  void recordSynchronousSave(double stallMs);

 private:
  // Waits for the writer (timed), returns this rank's "" or the failure of the write.
  // `bySave`: a save is waiting (counted in stats().waitedSaves), not wait() or the end.
  std::string collectPrevious(double* waitedMs, bool bySave);

  checkpoint::BackgroundWriter writer_{"strata-ckpt"};
  StateSnapshot snapshot_;
  mutable std::mutex statsMu_;
  CheckpointStats stats_;
  std::atomic<bool> failedUnreported_{false};
  std::string pendingDir_;  // the directory being written (for messages)
};

// Test-only: called on the checkpoint thread as a background write produces its shard
// (step, rank, bytes so far). Tests block in it to hold a write in flight. nullptr clears.
using BackgroundWriteHook = std::function<void(int64_t step, int rank, uint64_t bytesSoFar)>;
void TEST_setBackgroundWriteHook(BackgroundWriteHook hook);

}  // namespace strata::detail
