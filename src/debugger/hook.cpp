#include "debugger/hook.h"

#include <cstring>

#include "core/errors.h"
#include "core/logging.h"
#include "debugger/file_util.h"
#include "debugger/naming.h"
#include "debugger/trial_files.h"

namespace strata::debugger {
namespace {

size_t modeIndex(Mode mode) { return static_cast<size_t>(static_cast<int>(mode) - 1); }

bool rankWrites(const config::DebuggerConfig& config, int rank) {
  return config.enabled() && (config.includeWorkers == "all" || rank == 0);
}

}  // namespace

Hook::Hook(const config::DebuggerConfig& config, HookOptions options)
    : options_(std::move(options)),
      worker_(options_.worker.empty() ? workerNameForRank(options_.rank) : options_.worker),
      numWorkers_(config.includeWorkers == "all" ? options_.worldSize : 1),
      collections_(effectiveCollections(config)),
      matcher_(collections_) {
  STRATA_CHECK(options_.worldSize >= 1 && options_.rank >= 0 && options_.rank < options_.worldSize,
               "debugger hook: rank ", options_.rank, " outside world size ", options_.worldSize);
  if (!rankWrites(config, options_.rank)) return;
  STRATA_CHECK(!options_.outputDir.empty(), "debugger hook: empty output directory");
  TrialWriterOptions w;
  w.trialDir = options_.outputDir;
  w.worker = worker_;
  w.durable = options_.durable;
  w.tensorboard = options_.tensorboard;
  w.maxQueuedBytes = options_.maxQueuedBytes;
  writer_ = std::make_unique<TrialWriter>(std::move(w));
  // Early, because smdebug's reader blocks until every worker's collections file exists.
  writer_->writeCollections(collectionsFileJson(collections_, numWorkers_));
  tap_ = stepTap();
  if (tap_) tap_->collections(collections_);
  STRATA_LOG(kInfo, kAllSubsys, "debugger: ", worker_, " writes ", collections_.size(),
             " collection(s) to ", options_.outputDir, " (num_workers ", numWorkers_, ")");
}

Hook::~Hook() {
  try {
    close(false);
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kAllSubsys, "debugger: closing the hook failed: ", e.what());
  }
}

bool Hook::beginStep(Mode mode) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return false;
  counters_.globalStep += 1;
  auto& modeStep = counters_.modeSteps[modeIndex(mode)];
  modeStep = mode == Mode::kGlobal ? counters_.globalStep : modeStep + 1;
  mode_ = mode;
  inStep_ = true;
  modelTensorsOpen_ = true;
  due_ = writer_ ? dueCollections(collections_, mode, modeStep) : 0;
  // A step that is not due reaches the writer only if a scalar is saved in it; the
  // previous step, if the writer has it open, is published now rather than later.
  if (writer_ && stepQueued_) {
    writer_->endStep();
    if (tap_) tap_->stepsComplete();
  }
  stepQueued_ = false;
  if (writer_ && due_ != 0) queueStepLocked();
  return due_ != 0;
}

void Hook::queueStepLocked() {
  if (stepQueued_ || !inStep_) return;
  writer_->beginStep(counters_.globalStep, mode_, counters_.modeSteps[modeIndex(mode_)], due_ != 0);
  if (tap_) tap_->stepBegin(counters_.globalStep, mode_, counters_.modeSteps[modeIndex(mode_)], due_ != 0);
  stepQueued_ = true;
}

void Hook::endStep() {
  std::lock_guard<std::mutex> lock(mutex_);
  modelTensorsOpen_ = false;
}

bool Hook::anythingDue() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return modelTensorsOpen_ && due_ != 0;
}

bool Hook::isDue(const std::string& collectionName) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!modelTensorsOpen_) return false;
  for (size_t i = 0; i < collections_.size(); ++i)
    if (collections_[i].name == collectionName) return (due_ >> i) & 1u;
  return false;
}

bool Hook::wantsLocked(const std::string& tensorName, CollectionMask* containing) {
  if (!modelTensorsOpen_ || due_ == 0) return false;
  *containing = matcher_.collectionsOf(tensorName) & due_;
  return *containing != 0;
}

bool Hook::wantsTensor(const std::string& tensorName) {
  std::lock_guard<std::mutex> lock(mutex_);
  CollectionMask containing = 0;
  return wantsLocked(tensorName, &containing);
}

void Hook::enqueueLocked(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                         TensorBytes bytes, CollectionMask containing) {
  TensorPlan plan = planTensor(collections_, containing, name);
  if (tap_) tap_->tensor(name, dtype, shape, bytes, plan);
  writer_->tensor(name, dtype, shape, std::move(bytes), std::move(plan));
}

bool Hook::saveTensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                      const void* data) {
  std::lock_guard<std::mutex> lock(mutex_);
  CollectionMask containing = 0;
  if (!wantsLocked(name, &containing)) return false;  // decide before copying anything
  const size_t size = numelOf(shape) * dtypeBytes(dtype);
  auto copy = std::make_shared<std::string>(static_cast<const char*>(data), size);
  const void* bytes = copy->data();
  enqueueLocked(name, dtype, shape, TensorBytes{std::move(copy), bytes, size}, containing);
  return true;
}

bool Hook::saveTensorShared(const std::string& name, DType dtype,
                            const std::vector<int64_t>& shape, std::shared_ptr<const void> owner,
                            const void* data) {
  std::lock_guard<std::mutex> lock(mutex_);
  CollectionMask containing = 0;
  if (!wantsLocked(name, &containing)) return false;
  const size_t size = numelOf(shape) * dtypeBytes(dtype);
  enqueueLocked(name, dtype, shape, TensorBytes{std::move(owner), data, size}, containing);
  return true;
}

void Hook::saveScalar(const std::string& name, double value) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!writer_ || closed_) return;
  queueStepLocked();  // before the first step the scalar goes to TensorBoard only
  writer_->scalar(name, value);
  if (tap_ && stepQueued_) tap_->scalar(name, value);
}

void Hook::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (writer_ && !closed_) writer_->flush();
  if (tap_ && !closed_) tap_->stepsComplete();
}

void Hook::close(bool writeEndMarkerFile) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return;
  closed_ = true;
  inStep_ = false;
  modelTensorsOpen_ = false;
  if (tap_) tap_->stepsComplete();
  if (writer_) {
    writer_->close();
    const std::string error = writer_->firstError();
    if (!error.empty())
      STRATA_LOG(kError, kAllSubsys, "debugger: ", worker_, " had write errors; first: ", error);
  }
  if (writeEndMarkerFile) writeEndMarker(options_.outputDir);
}

Mode Hook::mode() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return mode_;
}

int64_t Hook::globalStep() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_.globalStep;
}

int64_t Hook::modeStep() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_.modeSteps[modeIndex(mode_)];
}

StepCounters Hook::counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_;
}

void Hook::restoreCounters(const StepCounters& counters) {
  std::lock_guard<std::mutex> lock(mutex_);
  STRATA_CHECK(!inStep_ && counters_.globalStep == -1,
               "debugger hook: restoreCounters must come before the first beginStep");
  counters_ = counters;
}

std::string Hook::firstError() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return writer_ ? writer_->firstError() : std::string();
}

uint64_t Hook::bytesWritten() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return writer_ ? writer_->bytesWritten() : 0;
}

uint64_t Hook::TEST_writerItems() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return writer_ ? writer_->itemsEnqueued() : 0;
}

void writeEndMarker(const std::string& outputDir) {
  touchFile(outputDir + "/" + kEndOfJobFile);
}

namespace {
std::mutex gTapMutex;
std::shared_ptr<StepTap> gTap;
}  // namespace

void setStepTap(std::shared_ptr<StepTap> tap) {
  std::lock_guard<std::mutex> lock(gTapMutex);
  gTap = std::move(tap);
}

std::shared_ptr<StepTap> stepTap() {
  std::lock_guard<std::mutex> lock(gTapMutex);
  return gTap;
}

}  // namespace strata::debugger
