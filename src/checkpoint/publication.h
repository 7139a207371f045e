// Publishing a checkpoint across ranks: what every rank reports after writing its part, and
// the decision (rank 0's) to commit the manifest. A checkpoint is published only when EVERY
// rank reported success and the shards its kind needs are all there; otherwise no manifest is
// written and every rank learns the first failure.
//
// The records travel by allgather (synchronous saves, src/adapter/checkpoint/checkpoint.cpp) or through
// the rendezvous store (background writes, checkpoint/async_publish.h); the decision is the
// same pure function for both. Everything here is pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/manifest.h"

namespace strata::checkpoint {

// Fixed size and layout, so it can be exchanged as raw bytes between ranks of one job.
struct ShardRecord {
  int32_t ok = 1;     // 0: this rank failed (error says why)
  int32_t wrote = 0;  // 1: this rank wrote a shard (bytes, sha256)
  int32_t rank = 0;
  int32_t ppRank = 0;
  uint64_t bytes = 0;
  char sha256[64] = {};
  char error[440] = {};  // room for a path and its reason, prefixed by the step and rank
};
static_assert(sizeof(ShardRecord) == 528, "fixed-size record for allgather and the store");

// A record of success that wrote nothing (yet).
ShardRecord makeShardRecord(int rank, int ppRank);
void markWritten(ShardRecord& record, const ShardInfo& shard);
// Marks failure; the error is cut to what fits (the record's size is fixed).
void markFailed(ShardRecord& record, const std::string& error);
std::string errorOf(const ShardRecord& record);

// "failed on rank <r>: <error>" for the lowest failing rank, or "" when all succeeded.
std::string firstFailure(const std::vector<ShardRecord>& records);

struct ManifestHeader {
  int64_t step = 0;
  int64_t epoch = 0;
  Kind kind = Kind::kFull;
  int worldSize = 1;
  int ppSize = 1;
  std::string createdUtc;
};

struct PublishDecision {
  bool publish = false;
  std::string why;    // when not publishing: the first problem, naming the rank
  Manifest manifest;  // when publishing: every shard written, in rank order
};

// Rank 0's decision from every rank's record (indexed by rank). Refuses unless there is one
// record per rank, every one is ok, and the shards match the kind: full, exactly one shard
// (rank 0's); partial, one per rank.
PublishDecision decidePublication(const std::vector<ShardRecord>& records, const ManifestHeader& header);

}  // namespace strata::checkpoint
