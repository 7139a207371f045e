#include "rules/step_feed.h"

#include <time.h>

#include "core/logging.h"
#include "debugger/naming.h"
#include "debugger/reductions.h"

namespace strata::rules {
namespace {

int64_t monotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

void StepFeed::push(Item item, size_t bytes, int64_t startNs) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool data = item.kind == Item::Kind::kTensor || item.kind == Item::Kind::kScalar;
  if (data && openStep_ < 0) {
    ++stats_.lateItems;  // after the step's completion: the files have it, the feed does not
  } else if (item.kind == Item::Kind::kTensor && queuedBytes_ + bytes > maxBytes_ && queuedBytes_ > 0) {
    ++stats_.droppedTensors;
    if (!warnedFull_) {
      warnedFull_ = true;
      STRATA_LOG(kWarn, kRules, "online rules: ", queuedBytes_, " bytes of tensors wait for the engine (limit ",
                 maxBytes_, "); tensors are left out of the in-process rules until it catches up");
    }
  } else {
    if (item.kind == Item::Kind::kStepBegin) openStep_ = item.step;
    if (item.kind == Item::Kind::kComplete) {
      openStep_ = -1;
      completePending_ = true;
    }
    queuedBytes_ += bytes;
    queue_.push_back(std::move(item));
  }
  stats_.producerNs += static_cast<uint64_t>(monotonicNs() - startNs);
}

void StepFeed::collections(const std::vector<debugger::Collection>& collections) {
  const int64_t t0 = monotonicNs();
  Item item;
  item.kind = Item::Kind::kCollections;
  for (const auto& c : collections) item.collections.emplace_back(c.name, c.includeRegex);
  push(std::move(item), 0, t0);
}

void StepFeed::stepBegin(int64_t globalStep, debugger::Mode mode, int64_t modeStep, bool due) {
  const int64_t t0 = monotonicNs();
  Item item;
  item.kind = Item::Kind::kStepBegin;
  item.step = globalStep;
  item.mode = mode;
  item.modeStep = modeStep;
  item.due = due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.steps;
  }
  push(std::move(item), 0, t0);
}

void StepFeed::tensor(const std::string& name, debugger::DType dtype, const std::vector<int64_t>& shape,
                      const debugger::TensorBytes& bytes, const debugger::TensorPlan& plan) {
  const int64_t t0 = monotonicNs();
  Item item;
  item.kind = Item::Kind::kTensor;
  item.name = name;
  item.dtype = dtype;
  item.shape = shape;
  item.bytes = bytes;  // shares the writer's buffer
  item.plan = plan;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.tensors;
  }
  push(std::move(item), bytes.size, t0);
}

void StepFeed::scalar(const std::string& name, double value) {
  const int64_t t0 = monotonicNs();
  Item item;
  item.kind = Item::Kind::kScalar;
  item.name = name;
  item.value = value;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.scalars;
  }
  push(std::move(item), 0, t0);
}

void StepFeed::stepsComplete() {
  const int64_t t0 = monotonicNs();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (openStep_ < 0) return;  // nothing open: nothing new to complete
  }
  Item item;
  item.kind = Item::Kind::kComplete;
  push(std::move(item), 0, t0);
  cv_.notify_one();
}

bool StepFeed::waitForWork(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [this] { return completePending_ || woken_; });
  woken_ = false;
  return completePending_;
}

void StepFeed::wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  cv_.notify_one();
}

StepFeed::Stats StepFeed::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

// As TrialWriter::Worker::tensor: nothing for empty tensors; reductions in double over the
// original dtype; raw values as stored (storedDType) and read back.
void StepFeed::convert(Item& item, PendingStep& step) const {
  if (item.kind == Item::Kind::kScalar) {
    step.values.emplace_back(debugger::scalarTensorName(item.name), TensorValue{{1}, {item.value}});
    return;
  }
  const size_t numel = debugger::numelOf(item.shape);
  if (numel == 0) return;
  if (!item.plan.reductions.empty()) {
    const std::vector<double> v = debugger::reduceAll(item.dtype, item.bytes.data, numel, item.plan.reductions);
    for (size_t i = 0; i < v.size(); ++i)
      step.reductions.push_back({item.name, debugger::reductionOpName(item.plan.reductions[i].op),
                                 item.plan.reductions[i].abs, v[i]});
  }
  if (item.plan.raw) {
    debugger::TensorData stored;
    stored.dtype = debugger::storedDType(item.dtype);
    stored.shape = item.shape;
    stored.bytes = debugger::toStoredBytes(item.dtype, item.bytes.data, numel);
    step.values.emplace_back(item.name, TensorValue{item.shape, stored.toDoubles()});
  }
}

void StepFeed::commit(PendingStep& step, OnlineTrial& trial, double nowSec) {
  if (step.due && step.values.empty() && step.reductions.empty()) {
    // The writer marks a due step that ended without tensors, so readers see the step.
    step.values.emplace_back(debugger::kStepMarkerTensor,
                             TensorValue{{1}, {static_cast<double>(step.info.modeStep)}});
  }
  step.info.wallTimeSec = nowSec;
  trial.addStep(step.info);
  for (auto& [name, value] : step.values) trial.addValue(step.info.step, name, std::move(value));
  for (const auto& r : step.reductions) trial.addReduction(step.info.step, r.name, r.op, r.abs, r.value);
  // No eviction here: a drain may commit several steps, and the rules must see each of them
  // before older values go (the engine evicts after evaluating).
}

size_t StepFeed::drainInto(OnlineTrial& trial, double nowSec) {
  std::vector<Item> items;
  {
    std::lock_guard<std::mutex> lock(mu_);
    items.swap(queue_);
    queuedBytes_ = 0;
    completePending_ = false;
  }
  size_t completed = 0;
  for (Item& item : items) {
    switch (item.kind) {
      case Item::Kind::kCollections: trial.setCollections(item.collections); break;
      case Item::Kind::kStepBegin:
        if (haveOpen_) {  // the hook began a step without completing the last: complete it now
          commit(open_, trial, nowSec);
          ++completed;
        }
        open_ = PendingStep{};
        open_.info.step = item.step;
        open_.info.mode = item.mode;  // one Mode (strata/types.h)
        open_.info.modeStep = item.modeStep;
        open_.due = item.due;
        haveOpen_ = true;
        break;
      case Item::Kind::kTensor:
      case Item::Kind::kScalar:
        if (haveOpen_) convert(item, open_);
        item.bytes.owner.reset();  // release the writer's buffer share at once
        break;
      case Item::Kind::kComplete:
        if (haveOpen_) {
          commit(open_, trial, nowSec);
          ++completed;
          haveOpen_ = false;
        }
        break;
    }
  }
  return completed;
}

}  // namespace strata::rules
