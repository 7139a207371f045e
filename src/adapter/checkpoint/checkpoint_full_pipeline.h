// A full (one-file) checkpoint of a pipeline whose ranks hold only their own stages (a
// LayerList model): rank 0 writes model.pt as one by-path file (adapter/checkpoint/tensor_shard.h) holding
// every parameter, buffer and optimizer state of the model by its path, and Strata's state.
//
// No rank gathers the model. Rank 0 writes its own stage from its live tensors, then asks the
// holder of each further stage in turn (the rank with rank 0's data-parallel index and that
// pipeline index) for its stage, and that rank streams it tensor by tensor and optimizer entry
// by entry, straight from its own tensors. Rank 0 copies each record into the file as it
// arrives, so it holds its own stage plus one incoming tensor (or one parameter's optimizer
// entry) at a time; a stage is not sent before rank 0 asks for it. A path already written (a
// tied weight whose copies sit on two stages under one path) is written once.
//
// The file loads in any layout like a partial checkpoint (adapter/checkpoint/checkpoint_by_path.h).
//
// Threading: the training thread; collective over the world.
#pragma once

#include <string>

#include "adapter/checkpoint/checkpoint_state.h"
#include "checkpoint/publication.h"
#include "strata/distributed_model.h"

namespace strata::detail {

// Writes <ckptDir>/<file> on rank 0 from every stage's `content` (each rank's partial
// content: captureLive(..., partial = true)). Returns this rank's record: rank 0's names the
// file's size and checksum, or its error; another rank's is a success that wrote nothing, or
// its error. Never throws on one rank alone: the caller agrees on the records.
checkpoint::ShardRecord writeFullPipelineShard(const std::string& ckptDir, const std::string& file,
                                               DistributedModel& model, const ShardContent& content);

}  // namespace strata::detail
