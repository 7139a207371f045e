#include "debugger/trial_writer.h"

#include <pthread.h>

#include <chrono>
#include <future>
#include <optional>

#include "core/errors.h"
#include "core/logging.h"
#include "debugger/file_util.h"
#include "debugger/histogram.h"
#include "debugger/naming.h"
#include "debugger/reductions.h"
#include "debugger/step_files.h"

namespace strata::debugger {
namespace {

double wallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TensorData scalarTensor(double value, std::vector<int64_t> shape) {
  TensorData t;
  t.dtype = DType::kFloat64;
  t.shape = std::move(shape);
  t.bytes.assign(reinterpret_cast<const char*>(&value), sizeof(value));
  return t;
}

}  // namespace

struct TrialWriter::Item {
  enum class Kind { kCollections, kBeginStep, kEndStep, kTensor, kScalar, kFlush } kind;
  // kCollections
  std::string json;
  // kBeginStep
  int64_t globalStep = 0;
  Mode mode = Mode::kGlobal;
  int64_t modeStep = 0;
  bool due = false;
  // kTensor / kScalar
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  TensorBytes bytes;
  TensorPlan plan;
  double value = 0;
  // kFlush
  std::unique_ptr<std::promise<void>> done;
};

// The state the thread keeps between items; touched only by the writer thread.
class TrialWriter::Worker {
 public:
  explicit Worker(const TrialWriterOptions& o) : o_(o) {
    if (o_.tensorboard) tb_.emplace(o_.trialDir, o_.worker);
  }

  uint64_t handle(Item& item) {
    switch (item.kind) {
      case Item::Kind::kCollections:
        writeFileAtomically(o_.trialDir + "/" + collectionsFileRelPath(o_.worker), item.json,
                            o_.durable ? Durability::kFileSynced : Durability::kAtomicOnly);
        return item.json.size();
      case Item::Kind::kBeginStep: {
        const uint64_t n = publish();
        step_.emplace(o_.trialDir, o_.worker, item.globalStep, item.mode, item.modeStep, o_.durable);
        globalStep_ = item.globalStep;
        mode_ = item.mode;
        modeStep_ = item.modeStep;
        due_ = item.due;
        return n;
      }
      case Item::Kind::kEndStep: return publish();
      case Item::Kind::kTensor: return tensor(item);
      case Item::Kind::kScalar: return scalar(item);
      case Item::Kind::kFlush: {
        const uint64_t n = publish();
        if (tb_) tb_->flush();
        return n;
      }
    }
    return 0;
  }

  // After an error: forget the step being written (its temporary file is removed).
  void dropStep() { step_.reset(); }
  void close() {
    if (tb_) tb_->close();
  }

 private:
  uint64_t publish() {
    if (!step_) return 0;
    if (due_ && step_->numTensors() == 0) {
      // Every writing rank writes every saved step, or readers count it incomplete.
      TensorData marker;
      marker.dtype = DType::kInt64;
      marker.shape = {1};
      marker.bytes.assign(reinterpret_cast<const char*>(&modeStep_), sizeof(modeStep_));
      step_->writeTensor(kStepMarkerTensor, std::move(marker), wallNow());
    }
    const uint64_t n = step_->bytesWritten();
    step_->publish();
    step_.reset();
    if (tb_) tb_->flush();
    return n;
  }

  uint64_t tensor(Item& item) {
    if (!step_) return 0;  // the step was dropped after an error (already logged)
    const double now = wallNow();
    const size_t numel = numelOf(item.shape);
    if (numel == 0) return 0;  // smdebug saves nothing for empty tensors
    const uint64_t before = step_->bytesWritten();
    if (!item.plan.reductions.empty()) {
      const auto values = reduceAll(item.dtype, item.bytes.data, numel, item.plan.reductions);
      for (size_t i = 0; i < values.size(); ++i)
        step_->writeTensor(reductionTensorName(item.name, item.plan.reductions[i]),
                           scalarTensor(values[i], {}), now);
    }
    if (item.plan.tensorboardScalar && tb_ && numel == 1) {
      tb_->writeScalar(mode_, item.name, viewOf(item).scalar(), globalStep_, now);
    }
    // smdebug draws no histogram of a bool tensor.
    if (!item.plan.histogramTag.empty() && tb_ && item.dtype != DType::kBool) {
      if (const auto h = makeHistogram(viewOf(item).toDoubles()))
        tb_->writeHistogram(mode_, cleanTensorboardTag(item.plan.histogramTag), *h, globalStep_, now);
    }
    if (item.plan.shapeOnly) step_->addShape(item.name, item.shape);
    if (item.plan.raw) {
      TensorData stored;
      stored.dtype = storedDType(item.dtype);
      stored.shape = std::move(item.shape);
      stored.bytes = toStoredBytes(item.dtype, item.bytes.data, numel);
      item.bytes.owner.reset();  // release the caller's buffer as early as possible
      step_->writeTensor(item.name, std::move(stored), now);
    }
    return step_->bytesWritten() - before;
  }

  static TensorData viewOf(const Item& item) {
    TensorData view;
    view.dtype = item.dtype;
    view.shape = item.shape;
    view.bytes.assign(static_cast<const char*>(item.bytes.data), item.bytes.size);
    return view;
  }

  uint64_t scalar(Item& item) {
    const double now = wallNow();
    if (tb_) tb_->writeScalar(mode_, item.name, item.value, globalStep_, now);
    if (!step_) return 0;
    const uint64_t before = step_->bytesWritten();
    step_->writeTensor(scalarTensorName(item.name), scalarTensor(item.value, {1}), now);
    return step_->bytesWritten() - before;
  }

  const TrialWriterOptions& o_;
  std::optional<StepFileWriter> step_;
  std::optional<TensorboardWriter> tb_;
  int64_t globalStep_ = 0;
  Mode mode_ = Mode::kGlobal;
  int64_t modeStep_ = 0;
  bool due_ = false;
};

TrialWriter::TrialWriter(TrialWriterOptions options) : options_(std::move(options)) {
  STRATA_CHECK(isValidWorkerName(options_.worker), "invalid worker name \"", options_.worker,
               "\" (letters, digits, '_', '-', '.', and no \"__\")");
  thread_ = std::thread([this] { run(); });
}

TrialWriter::~TrialWriter() {
  try {
    close();
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kAllSubsys, "debugger: closing the writer failed: ", e.what());
  }
}

void TrialWriter::push(std::unique_ptr<Item> item, size_t bytes) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (closed_) return;
  spaceFreed_.wait(lock, [&] { return queue_.empty() || queuedBytes_ + bytes <= options_.maxQueuedBytes; });
  queuedBytes_ += bytes;
  ++itemsEnqueued_;
  queue_.push_back(std::move(item));
  itemReady_.notify_one();
}

void TrialWriter::writeCollections(std::string json) {
  auto item = std::make_unique<Item>();
  item->kind = Item::Kind::kCollections;
  item->json = std::move(json);
  push(std::move(item), 0);
}

void TrialWriter::beginStep(int64_t globalStep, Mode mode, int64_t modeStep, bool due) {
  auto item = std::make_unique<Item>();
  item->kind = Item::Kind::kBeginStep;
  item->globalStep = globalStep;
  item->mode = mode;
  item->modeStep = modeStep;
  item->due = due;
  push(std::move(item), 0);
}

void TrialWriter::endStep() {
  auto item = std::make_unique<Item>();
  item->kind = Item::Kind::kEndStep;
  push(std::move(item), 0);
}

void TrialWriter::tensor(std::string name, DType dtype, std::vector<int64_t> shape,
                         TensorBytes bytes, TensorPlan plan) {
  STRATA_CHECK(dtype != DType::kString, "tensor \"", name, "\": string tensors are not written");
  const size_t expected = numelOf(shape) * dtypeBytes(dtype);
  STRATA_CHECK(bytes.size == expected, "tensor \"", name, "\": ", bytes.size,
               " bytes given, shape and dtype ", dtypeName(dtype), " need ", expected);
  auto item = std::make_unique<Item>();
  item->kind = Item::Kind::kTensor;
  item->name = std::move(name);
  item->dtype = dtype;
  item->shape = std::move(shape);
  item->bytes = std::move(bytes);
  item->plan = std::move(plan);
  push(std::move(item), expected);
}

void TrialWriter::scalar(std::string name, double value) {
  auto item = std::make_unique<Item>();
  item->kind = Item::Kind::kScalar;
  item->name = std::move(name);
  item->value = value;
  push(std::move(item), 0);
}

void TrialWriter::flush() {
  auto item = std::make_unique<Item>();
  item->kind = Item::Kind::kFlush;
  item->done = std::make_unique<std::promise<void>>();
  std::future<void> done = item->done->get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;
  }
  push(std::move(item), 0);
  done.wait();
}

void TrialWriter::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;
  }
  flush();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    stopping_ = true;
    itemReady_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

std::string TrialWriter::firstError() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return firstError_;
}

uint64_t TrialWriter::bytesWritten() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytesWritten_;
}

uint64_t TrialWriter::itemsEnqueued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return itemsEnqueued_;
}

void TrialWriter::run() {
  pthread_setname_np(pthread_self(), "strata-dbg");
  Worker worker(options_);
  for (;;) {
    std::unique_ptr<Item> item;
    size_t itemBytes = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      itemReady_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) break;  // stopping and drained
      item = std::move(queue_.front());
      queue_.pop_front();
      if (item->kind == Item::Kind::kTensor) itemBytes = item->bytes.size;
    }
    uint64_t written = 0;
    std::string error;
    try {
      written = worker.handle(*item);
    } catch (const std::exception& e) {
      error = e.what();
      worker.dropStep();
    }
    if (!error.empty()) STRATA_LOG(kError, kAllSubsys, "debugger: ", error);
    item->bytes.owner.reset();
    if (item->kind == Item::Kind::kFlush) item->done->set_value();
    std::lock_guard<std::mutex> lock(mutex_);
    queuedBytes_ -= itemBytes;
    bytesWritten_ += written;
    if (!error.empty() && firstError_.empty()) firstError_ = error;
    spaceFreed_.notify_all();
  }
  try {
    worker.close();
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kAllSubsys, "debugger: ", e.what());
  }
}

}  // namespace strata::debugger
