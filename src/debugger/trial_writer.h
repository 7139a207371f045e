// The background writer of one worker's trial files: a queue drained by one thread named
// "strata-dbg", which converts dtypes, computes reductions, serializes events and does all
// file I/O, so the training thread only enqueues (and, for saveTensor, takes one memcpy).
//
// Threading: every public method may be called from any thread, but items are written in
// the order they were enqueued, so a single producer (the Hook, under its mutex) is assumed.
// push() blocks while more than maxQueuedBytes of tensor data is waiting (backpressure
// instead of unbounded memory).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "debugger/collections.h"
#include "debugger/types.h"

namespace strata::debugger {

// 1 GiB: a few full copies of a mid-sized model's weights and gradients; above that the
// training thread waits for the disk rather than growing memory without bound.
inline constexpr size_t kDefaultMaxQueuedBytes = size_t{1} << 30;

struct TrialWriterOptions {
  std::string trialDir;
  std::string worker;
  bool durable = true;      // fdatasync before each rename
  bool tensorboard = true;  // scalar files under <trialDir>/tensorboard/
  size_t maxQueuedBytes = kDefaultMaxQueuedBytes;
};

// Raw tensor bytes that stay valid until `owner` is released.
struct TensorBytes {
  std::shared_ptr<const void> owner;
  const void* data = nullptr;
  size_t size = 0;
};

class TrialWriter {
 public:
  explicit TrialWriter(TrialWriterOptions options);
  ~TrialWriter();  // close()
  TrialWriter(const TrialWriter&) = delete;
  TrialWriter& operator=(const TrialWriter&) = delete;

  // Writes collections/000000000/<worker>_collections.json (by rename).
  void writeCollections(std::string json);
  // Publishes the open step (if any) and opens (globalStep, mode, modeStep). With
  // `due`, a step that ends with no tensor gets the step marker (naming.h).
  void beginStep(int64_t globalStep, Mode mode, int64_t modeStep, bool due);
  // Publishes the open step now (if any); later tensors need a new beginStep.
  void endStep();
  // One tensor of the open step: raw and/or reductions and/or a TensorBoard scalar.
  void tensor(std::string name, DType dtype, std::vector<int64_t> shape, TensorBytes bytes,
              TensorPlan plan);
  // A user scalar: "scalar/<name>" record in the open step's file, and a TensorBoard scalar
  // tagged `name`.
  void scalar(std::string name, double value);
  // Blocks until everything queued so far is written and the open step is published.
  void flush();
  // flush() and stop the thread; idempotent. Later calls are ignored.
  void close();

  // The first error the thread met (empty if none). Errors are logged, the step being
  // written is dropped, and writing continues with the next step.
  std::string firstError() const;
  uint64_t bytesWritten() const;
  // Items enqueued so far (tests: steps that are not due must enqueue nothing).
  uint64_t itemsEnqueued() const;

 private:
  struct Item;
  class Worker;
  void push(std::unique_ptr<Item> item, size_t bytes);
  void run();

  TrialWriterOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable itemReady_;
  std::condition_variable spaceFreed_;
  std::deque<std::unique_ptr<Item>> queue_;
  size_t queuedBytes_ = 0;
  bool stopping_ = false;
  bool closed_ = false;
  std::string firstError_;
  uint64_t bytesWritten_ = 0;
  uint64_t itemsEnqueued_ = 0;
  std::thread thread_;
};

}  // namespace strata::debugger
