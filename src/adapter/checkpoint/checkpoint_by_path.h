// Loading a partial checkpoint whose shards are by-path files (adapter/checkpoint/tensor_shard.h):
// whatever layout wrote it (4 pipeline stages, 2, data parallel, one process), every rank
// reads from the shards that hold them exactly its own tensors and its own parameters'
// optimizer state, nothing of other stages. Internal to the adapter.
//
// Threading: the training thread; the constructor is collective over the world.
#pragma once

#include <torch/serialize/input-archive.h>

#include <memory>
#include <string>
#include <vector>

#include "adapter/checkpoint/tensor_shard.h"
#include "checkpoint/manifest.h"
#include "checkpoint/tensor_index.h"
#include "strata/distributed_model.h"

namespace strata::detail {

class ByPathCheckpoint {
 public:
  // Collective over the world. Opens every shard's index (shard sizes checked against the
  // manifest), then checks that the model is the one the checkpoint holds: the union of
  // every rank's parameter and buffer paths, dtypes and shapes must equal the checkpoint's.
  // Throws strata::Error on every rank when any rank failed, naming it; a different model
  // as "checkpoint <dir> was written by a different model: <first difference>".
  ByPathCheckpoint(const std::string& dir, const checkpoint::Manifest& manifest, DistributedModel& model);
  ~ByPathCheckpoint();

  // Not collective (throw; the caller agrees). Copies this rank's parameters and buffers in
  // place (parameters keep their storage).
  void restoreTensors(DistributedModel& model);
  // Restores the optimizer's state and group options of this rank's parameters. An optimizer
  // without a per-parameter form restores from the rank's own shard on the same layout only.
  void restoreOptimizer(DistributedModel& model, DistributedOptimizer& optimizer, bool sameLayout);
  // The shard whose Strata state (counters, generator, sampler) this rank takes: its own,
  // else world rank 0's; `own` says which.
  torch::serialize::InputArchive stateArchive(bool* own);

 private:
  std::string dir_;
  std::vector<std::string> files_;
  std::vector<std::unique_ptr<TensorShardReader>> readers_;
  std::unique_ptr<checkpoint::ShardCatalog> catalog_;
  size_t stateShard_ = 0;
  bool ownShard_ = false;
};

}  // namespace strata::detail
