// The debugger hook's data, handed to the online rule engine in memory (debugger::StepTap).
//
// The training thread only queues: a tensor costs a shared-pointer copy of the bytes the
// writer already holds (no copy of the data) and a short mutex; nothing here blocks it. The
// engine's thread converts the queued items exactly as the writer converts them for the files
// (storedDType values, the same reductions, "scalar/<name>", the step marker of a due step
// without tensors) into an OnlineTrial, one complete step at a time.
//
// A step is complete when the hook begins the next step or flushes, or when the runtime
// reaches a step boundary (stepsComplete() from strata::should_stop()); what the hook saves
// for a step after that (a tensor saved after should_stop()) is counted as late and left to
// the files.
//
// Memory: queued tensor bytes are bounded (maxQueuedBytes); beyond it tensors are dropped
// from the feed (counted, warned once), never from the files, and never does training wait.
//
// Threading: the StepTap methods are for the hook (one producer thread); waitForWork,
// drainInto and stats for one consumer thread; wake() and stats() from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "debugger/step_tap.h"
#include "rules/online_trial.h"

namespace strata::rules {

// 256 MiB of tensors waiting for the engine: a few copies of a mid-sized model's weights.
inline constexpr size_t kDefaultFeedBytes = size_t{256} << 20;

class StepFeed final : public debugger::StepTap {
 public:
  explicit StepFeed(size_t maxQueuedBytes = kDefaultFeedBytes) : maxBytes_(maxQueuedBytes) {}

  void collections(const std::vector<debugger::Collection>& collections) override;
  void stepBegin(int64_t globalStep, debugger::Mode mode, int64_t modeStep, bool due) override;
  void tensor(const std::string& name, debugger::DType dtype, const std::vector<int64_t>& shape,
              const debugger::TensorBytes& bytes, const debugger::TensorPlan& plan) override;
  void scalar(const std::string& name, double value) override;
  void stepsComplete() override;

  // Consumer: waits until a step completed, wake() was called, or `timeout` passed. Returns
  // whether there is something to drain.
  bool waitForWork(std::chrono::milliseconds timeout);
  // Ends a waitForWork (stop).
  void wake();
  // Applies everything queued to `trial` (steps completed get wall time `nowSec`) without
  // evicting: the caller evaluates the new steps, then calls trial.evict(). Returns the
  // number of steps completed.
  size_t drainInto(OnlineTrial& trial, double nowSec);

  struct Stats {
    uint64_t tensors = 0, scalars = 0, steps = 0;  // handed over by the hook
    uint64_t droppedTensors = 0;                   // queue full
    uint64_t lateItems = 0;                        // for a step already complete
    uint64_t producerNs = 0;                       // time the training thread spent in the tap
  };
  Stats stats() const;

 private:
  struct Item {
    enum class Kind { kCollections, kStepBegin, kTensor, kScalar, kComplete } kind = Kind::kComplete;
    int64_t step = 0, modeStep = 0;
    debugger::Mode mode = debugger::Mode::kGlobal;
    bool due = false;
    std::string name;
    debugger::DType dtype = debugger::DType::kFloat32;
    std::vector<int64_t> shape;
    debugger::TensorBytes bytes;
    debugger::TensorPlan plan;
    double value = 0;
    std::vector<std::pair<std::string, std::vector<std::string>>> collections;
  };
  // The step being assembled on the consumer side.
  struct PendingStep {
    StepInfo info;
    bool due = false;
    std::vector<std::pair<std::string, TensorValue>> values;
    struct Red {
      std::string name, op;
      bool abs;
      double value;
    };
    std::vector<Red> reductions;
  };
  void push(Item item, size_t bytes, int64_t startNs);
  void convert(Item& item, PendingStep& step) const;
  static void commit(PendingStep& step, OnlineTrial& trial, double nowSec);

  const size_t maxBytes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Item> queue_;
  size_t queuedBytes_ = 0;
  bool completePending_ = false;
  bool woken_ = false;
  int64_t openStep_ = -1;  // producer side: the hook's open step
  Stats stats_;
  bool warnedFull_ = false;
  // Consumer side.
  bool haveOpen_ = false;
  PendingStep open_;
};

}  // namespace strata::rules
