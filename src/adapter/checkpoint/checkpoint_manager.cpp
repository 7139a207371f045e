// CheckpointManager: the job config's "checkpoint" section in a training loop (every_steps,
// resume, keep, async), and stopping on SIGTERM/SIGINT with a complete checkpoint.
#include <chrono>

#include "adapter/checkpoint/checkpoint_async.h"
#include "core/errors.h"
#include "core/logging.h"
#include "runtime/runtime_internal.h"
#include "runtime/signals.h"
#include "runtime/stop.h"
#include "strata/checkpoint.h"
#include "strata/runtime.h"

namespace strata {

CheckpointManager::CheckpointManager(DistributedModel& model, DistributedOptimizer& optimizer,
                                     DistributedSampler* sampler, CheckpointOptions options)
    : model_(model), optimizer_(optimizer), sampler_(sampler), options_(std::move(options)) {
  const config::CheckpointConfig& cfg = runtime::jobConfig().checkpoint;
  if (options_.dir.empty()) options_.dir = cfg.dir;
  if (options_.everySteps < 0) options_.everySteps = cfg.everySteps;
  if (options_.resume < 0) options_.resume = cfg.resume ? 1 : 0;
  if (options_.keep < 0) options_.keep = cfg.keep;
  // A sharded optimizer's state is spread over the ranks: only partial checkpoints hold it all.
  if (options_.partial < 0)
    options_.partial = model.pp_size() > 1 || model.model_parallel() || optimizer.sharded() ? 1 : 0;
  if (options_.async < 0) options_.async = cfg.async ? 1 : 0;
  if (options_.async) {
    if (!options_.partial && model.pp_size() > 1) {
      STRATA_LOG(kWarn, kInit, "checkpoint.async: a full checkpoint of a pipeline is streamed to rank 0 stage by ",
                 "stage at the step boundary; checkpoints are written there (partial ones can be written in the ",
                 "background)");
    } else if (detail::StateSnapshot::supports(optimizer)) {
      async_ = 1;
    } else {
      STRATA_LOG(kWarn, kInit, "checkpoint.async: this optimizer's state cannot be copied for a background write ",
                 "(supported: SGD, Adam, AdamW, Adagrad, RMSprop); checkpoints are written at the step boundary");
    }
  }
  checkpointer_ = std::make_shared<detail::AsyncCheckpointer>();
  // finalize() waits for the write in flight and joins the checkpoint thread, also when the
  // manager outlives it.
  std::weak_ptr<detail::AsyncCheckpointer> weak = checkpointer_;
  runtime::addFinalizer([weak] {
    if (auto checkpointer = weak.lock()) checkpointer->shutdown();
  });
  runtime::installStopSignalHandlers();
}

CheckpointManager::~CheckpointManager() {
  if (checkpointer_) checkpointer_->shutdown();
}

int64_t CheckpointManager::resume() {
  if (!options_.resume) return 0;
  checkpointer_->wait();  // a checkpoint of this run still being written is published first
  LoadOptions lo;
  lo.sampler = sampler_;
  const std::optional<LoadResult> r = load(options_.dir, model_, optimizer_, lo);
  if (!r) {
    STRATA_LOG(kInfo, kInit, "checkpoint: nothing to resume in ", options_.dir, "; starting from step 0");
    return 0;
  }
  epoch_ = r->epoch;
  lastSavedStep_ = r->step;
  return r->step;
}

bool CheckpointManager::after_step(int64_t stepsDone, int64_t epoch) {
  const bool due = options_.everySteps > 0 && stepsDone % options_.everySteps == 0;
  const bool stop = should_stop();
  if (stop) {
    // Did a signal (on any rank) ask? Then the process exits with kExitStopped.
    int32_t signal = runtime::localStopCause() == runtime::StopCause::kSignal ? 1 : 0;
    if (size() > 1) world().allreduce(&signal, &signal, 1, DType::kInt32, ReduceOp::kMax);
    stoppedBySignal_ = signal != 0;
  }
  if ((due || stop) && stepsDone != lastSavedStep_) save(stepsDone, epoch);
  // Leaving the loop: the checkpoint of this step is complete before the caller exits (exit
  // code 75 promises it), also when it was written in the background.
  if (stop) checkpointer_->wait();
  return stop;
}

std::string CheckpointManager::save(int64_t stepsDone, int64_t epoch) {
  if (async_) {
    detail::AsyncSaveRequest request;
    request.root = options_.dir;
    request.step = stepsDone;
    request.epoch = epoch;
    request.keep = options_.keep;
    request.partial = options_.partial != 0;
    request.sampler = sampler_;
    lastSaved_ = checkpointer_->save(request, model_, optimizer_);
  } else {
    const auto start = std::chrono::steady_clock::now();
    SaveOptions so;
    so.partial = options_.partial != 0;
    so.step = stepsDone;
    so.epoch = epoch;
    so.sampler = sampler_;
    so.keep = options_.keep;
    lastSaved_ = strata::save(options_.dir, model_, optimizer_, so);
    checkpointer_->recordSynchronousSave(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  lastSavedStep_ = stepsDone;
  return lastSaved_;
}

void CheckpointManager::wait() { checkpointer_->wait(); }

CheckpointStats CheckpointManager::stats() const { return checkpointer_->stats(); }

int CheckpointManager::exit_code() const {
  checkpointer_->settle();
  if (checkpointer_->failedUnreported()) return kExitFailed;
  return stoppedBySignal_ ? kExitStopped : 0;
}

}  // namespace strata
