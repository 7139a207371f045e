// Checkpoints: save and load the whole training state, resume exactly, survive SIGTERM
// and SIGKILL (docs/checkpoints.md).
//
//   strata::CheckpointManager ckpt(model, opt, &sampler);   // checkpoint.* of the job config
//   int64_t step = ckpt.resume();                 // 0, or the steps a checkpoint already did
//   auto loader = torch::data::make_data_loader(dataset, sampler, ...);
//   bool stop = false;
//   for (int64_t epoch = ckpt.epoch(); step < total && !stop; ++epoch)
//     for (auto& batch : *loader) {
//       ... one training step ...
//       stop = ckpt.after_step(++step, epoch);       // saves every_steps, and on a stop request
//       if (stop || step == total) break;
//     }
//   return ckpt.exit_code();                      // strata::kExitStopped after SIGTERM/SIGINT
//
// What a checkpoint holds: parameters and buffers, the optimizer state, the step and epoch
// counters, the CPU generator's state of every rank, the sampler's epoch and position, the
// model's step counter (the profiler's step numbers) and the debugger hook's step counters.
//
// On disk (<dir>/step-<12 digits>/): a manifest listing every shard with its size and SHA-256,
// written last and atomically (temp file, fsync, rename, fsync dir). kind "full": one file,
// model.pt, written by rank 0; a plain single-process libtorch program loads it with
//     torch::load(net, "<dir>/step-000000000120/model.pt");
// (the module's parameters and buffers sit at the top of the archive exactly where
// torch::save(net, path) puts them; Strata's own state is in a sub-archive "strata_state"
// that Module::load ignores). kind "partial": every rank writes rank-<r>.pt with its own
// parameters (its pipeline stage) and their optimizer state, keyed by parameter path; any
// layout of the same model resumes it (another partition count, data parallel, one process),
// each rank reading only its own tensors. A different model is refused on every rank, naming
// the first differing parameter.
//
// Every call here is collective over the world (every rank calls it, in the same order) and
// throws strata::Error on every rank if any rank failed to write its part; a failed save
// never leaves a checkpoint that resume would take.
//
// Asynchronous checkpoints ("checkpoint": {"async": true}, CheckpointManager only): a save
// copies the state into reused host buffers at the step boundary (an extra copy of the
// checkpointed state in host memory) and a background thread ("strata-ckpt") writes and
// publishes it, with the same files, checksums and manifest-last commit, while training goes
// on. At most one write is in flight: the next save first waits for the previous one, and
// throws on every rank if it failed (it is also logged at once, with the rank). A stop
// request (SIGTERM/SIGINT) waits for the write in flight and then for the final checkpoint,
// so exit code 75 still means "a complete checkpoint of the step it stopped at".
// strata::finalize() waits for the write in flight and joins the thread.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "strata/data.h"
#include "strata/distributed_model.h"
#include "strata/exit_codes.h"

namespace strata {

struct SaveOptions {
  // Each rank writes its own shard (its pipeline stage) instead of rank 0 writing one file.
  bool partial = false;
  int64_t step = -1;   // steps completed; -1: the model's steps_taken()
  int64_t epoch = 0;
  DistributedSampler* sampler = nullptr;  // saved when given
  int keep = -1;       // newest checkpoints kept; -1: checkpoint.keep of the job config; 0: all
};

// Writes <dir>/step-<step>/ and prunes to the newest `keep`. Returns the checkpoint's
// directory.
std::string save(const std::string& dir, DistributedModel& model, DistributedOptimizer& optimizer,
                 SaveOptions options = {});

struct LoadOptions {
  DistributedSampler* sampler = nullptr;  // restored when given (same number of ranks only)
  bool restoreRng = true;                 // the CPU generator state
};

struct LoadResult {
  std::string path;   // the checkpoint directory taken
  int64_t step = 0;   // steps it had completed
  int64_t epoch = 0;
  bool sameLayout = true;  // taken with the same world size and pipeline size
};

// `dir` is a checkpoint root (the newest complete checkpoint is taken; incomplete or
// corrupted newer ones are skipped with a logged reason) or one step-* directory. Restores
// the model (all ranks), the optimizer, the counters, and what LoadOptions asks for.
// Returns nullopt when the root holds no complete checkpoint.
std::optional<LoadResult> load(const std::string& dir, DistributedModel& model, DistributedOptimizer& optimizer,
                               LoadOptions options = {});

// Incremental training: parameters and buffers from a model artifact, either a full
// checkpoint's model.pt or a file written by torch::save(module, path). Not collective:
// call it on every rank before building the DistributedModel (which then starts from it).
void load_module(const std::string& path, torch::nn::Module& module);

struct CheckpointOptions {
  std::string dir;           // "": checkpoint.dir of the job config
  int64_t everySteps = -1;   // -1: checkpoint.every_steps (0: only on stop requests)
  int resume = -1;           // -1: checkpoint.resume; 0: no; 1: yes
  int keep = -1;             // -1: checkpoint.keep
  int partial = -1;          // -1: partial when model parallel, full otherwise
  int async = -1;            // -1: checkpoint.async; 0: write at the step boundary; 1: in the background
};

// What saving costs the training loop (CheckpointManager::stats()).
struct CheckpointStats {
  int64_t saves = 0;            // checkpoints taken
  int64_t backgroundSaves = 0;  // of which written in the background
  int64_t waitedSaves = 0;      // saves that found the previous background write in flight and waited
  double lastStallMs = 0;       // the training thread's time in the last save (a synchronous one: the write)
  double lastWaitMs = 0;        // of which waiting for the previous background write
  double lastSnapshotMs = 0;    // of which copying the state (background saves)
  double maxStallMs = 0;
  double totalStallMs = 0;
  double totalWaitMs = 0;
  uint64_t snapshotBytes = 0;   // host memory this rank keeps for snapshots
  int64_t inFlightStep = -1;    // the step being written in the background, or -1
  bool waiting = false;         // a save is waiting for the previous background write right now
};

namespace detail {
class AsyncCheckpointer;
}

// Automatic checkpoints from the job config's "checkpoint" section, resume, and stopping on
// SIGTERM/SIGINT. Constructing one installs the SIGTERM/SIGINT handlers (a signal asks to
// stop at the next step boundary: runtime/signals.h).
class CheckpointManager {
 public:
  CheckpointManager(DistributedModel& model, DistributedOptimizer& optimizer, DistributedSampler* sampler = nullptr,
                    CheckpointOptions options = {});
  // Waits for a background write in flight (a failure nobody collected is logged). Not
  // collective; never throws.
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // With resume on: loads the newest complete checkpoint. Returns the steps it had completed
  // (where to continue), 0 when resume is off or there is none. Collective.
  int64_t resume();
  // The epoch of the checkpoint resume() loaded (0 otherwise).
  int64_t epoch() const { return epoch_; }

  // Call after every training step with the number of steps completed. Saves when
  // every_steps divides it, or when strata::should_stop() says every rank should stop; then
  // returns true (leave the training loop) once that checkpoint is complete, also when it
  // was written in the background. Collective.
  bool after_step(int64_t stepsDone, int64_t epoch = 0);
  // Saves now (collective). Returns the checkpoint's directory; with async on, it is complete
  // once the background write is published (wait()).
  std::string save(int64_t stepsDone, int64_t epoch = 0);
  // Waits until the background write in flight (if any) is published. Collective; throws
  // strata::Error on every rank when it failed on any.
  void wait();
  // Whether saves are written in the background (async on, and an optimizer whose state can
  // be copied: SGD, Adam, AdamW, Adagrad, RMSprop; others are saved synchronously).
  bool async() const { return async_ != 0; }
  // Thread-safe.
  CheckpointStats stats() const;

  // Whether a signal (on any rank) stopped training.
  bool stopped_by_signal() const { return stoppedBySignal_; }
  // kExitStopped after a signal stop, else 0: what main() should return. Waits for a
  // background write in flight; kExitFailed when one failed and no call reported it.
  int exit_code() const;
  const std::string& dir() const { return options_.dir; }
  const std::string& last_saved() const { return lastSaved_; }

 private:
  DistributedModel& model_;
  DistributedOptimizer& optimizer_;
  DistributedSampler* sampler_;
  CheckpointOptions options_;
  int64_t epoch_ = 0;
  int64_t lastSavedStep_ = -1;
  bool stoppedBySignal_ = false;
  std::string lastSaved_;
  int async_ = 0;  // resolved: 1 when saves are written in the background
  std::shared_ptr<detail::AsyncCheckpointer> checkpointer_;  // also finalize's (weakly)
};

}  // namespace strata
