// What one checkpoint shard holds, and how it becomes an archive (internal to the adapter).
//
// Two forms of the same content:
//   LIVE      references to the model's and optimizer's own tensors (captureLive): a
//             synchronous save writes them before training goes on;
//   SNAPSHOT  copies in CPU buffers reused from one save to the next (StateSnapshot::take):
//             an asynchronous save copies at the step boundary, and the checkpoint thread
//             writes the copies while training changes the originals.
// Both are written by writeShardContent, so both forms give the same files.
#pragma once

#include <torch/nn/module.h>
#include <torch/serialize/output-archive.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "adapter/checkpoint/optimizer_snapshot.h"
#include "checkpoint/manifest.h"
#include "strata/data.h"
#include "strata/distributed_model.h"

namespace strata::detail {

using torch::serialize::OutputArchive;

// Sub-archive names. Module::load reads only the module's own keys, so a full checkpoint's
// extra state never disturbs torch::load(module, path).
inline constexpr const char* kStateArchiveKey = "strata_state";  // optimizer, counters, RNG, sampler
inline constexpr const char* kLocalArchiveKey = "strata_local";  // tensors of an older partial shard

struct ShardContent {
  bool partial = false;
  // Full: writes the module at the top level of the archive (torch::save(module)'s layout).
  std::function<void(OutputArchive&)> writeModule;
  // Partial: this rank's parameters and buffers by their path in the model, written as a
  // by-path file (adapter/checkpoint/tensor_shard.h). aliasOf[i] >= 0: the same storage as tensor
  // aliasOf[i] (the uses of a tied weight on this rank), stored once.
  std::vector<std::string> names;
  std::vector<torch::Tensor> tensors;
  std::vector<int> aliasOf;
  std::vector<bool> isBuffer;
  // Partial: the optimizer's state by parameter path (optimizerKind "AdamW", ...). Empty
  // kind: an optimizer whose state has no per-parameter form; writeOptimizer's archive is
  // kept instead, which resumes on the same layout only.
  std::string optimizerKind;
  std::vector<std::pair<std::string, ParamSlot>> optimizerSlots;
  std::function<void(const EmitEntry&)> forEachOptimizerEntry;
  // Full (and partial without a per-parameter form): optimizer.save()'s archive.
  std::function<void(OutputArchive&)> writeOptimizer;
  std::vector<int64_t> counters;          // step, epoch, model steps, world size, pipeline size
  std::vector<int64_t> debuggerCounters;  // global, train, eval, predict, global-mode
  std::vector<torch::Tensor> rngStates;   // full: every rank's; partial: this rank's
  std::shared_ptr<OutputArchive> sampler; // null: no sampler
};

// The live state. Collective for a full checkpoint (every rank's generator state is gathered),
// so every rank calls it; cheap otherwise (no tensor is copied).
ShardContent captureLive(DistributedModel& model, DistributedOptimizer& optimizer, DistributedSampler* sampler,
                         int64_t step, int64_t epoch, bool partial);

// Called as the shard's bytes are produced (bytes so far); tests slow a write down with it.
using WriteProgress = std::function<void(uint64_t bytesSoFar)>;

// Serialises the content and writes it as <dir>/<file> (temp file, SHA-256, fsync, rename,
// fsync dir). Returns its size and checksum. Throws strata::Error.
checkpoint::ShardInfo writeShardContent(const std::string& dir, const std::string& file, const ShardContent& content,
                                        const WriteProgress& progress = nullptr);

// A by-path file (a partial shard; the one file of a pipeline's full checkpoint) in two parts:
// the content's tensors and optimizer entries; then Strata's state and the index, after which
// nothing may be added. A full checkpoint of a pipeline adds the other stages in between.
class TensorShardWriter;
void writeTensorsByPath(TensorShardWriter& writer, const ShardContent& content);
void finishByPath(TensorShardWriter& writer, const ShardContent& content);

// Reused copies of one rank's shard content.
// Threading: take() on the training thread; the content it returns may be written on another
// thread until the next take(), which must wait for that write.
class StateSnapshot {
 public:
  // Whether take() can copy this optimizer's state (OptimizerSnapshot::supports).
  static bool supports(DistributedOptimizer& optimizer);
  // Copies every tensor of `live` (and the module's, for a full checkpoint; the optimizer's
  // state) into this snapshot's buffers, reallocating only what changed shape or dtype.
  ShardContent take(const ShardContent& live, DistributedModel& model, DistributedOptimizer& optimizer);
  uint64_t bytes() const;  // held in the buffers

  // A module's tensors in Module::save's layout: at each level the module's own parameters,
  // then its buffers, then every serialisable child as a sub-archive.
  struct ModuleTree {
    struct Leaf {
      std::string name;
      size_t index = 0;  // into the snapshot's buffers
      bool isBuffer = false;
      bool requiresGrad = false;
    };
    std::vector<Leaf> leaves;
    std::vector<std::pair<std::string, ModuleTree>> children;
  };

 private:
  ModuleTree tree_;                     // full checkpoints
  std::vector<torch::Tensor> buffers_;  // the module's (full) or the rank's (partial) tensors
  OptimizerSnapshot optimizer_;
};

}  // namespace strata::detail
