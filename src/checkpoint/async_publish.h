// The background half of an asynchronous checkpoint. Every rank's "strata-ckpt" thread runs
// publishThroughStore for the same save (the same key) while training goes on; the
// rendezvous store stands in for the synchronous path's collectives, which belong to the
// training thread. The on-disk protocol is the synchronous one (checkpoint/writer.h):
//
//   rank 0:     beginCheckpoint(root, step)                 -> <key>/ready
//   every rank: wait for <key>/ready, then write its shard if it has one
//               (temp file, fsync, rename, fsync dir)       -> <key>/shard/<rank> (a ShardRecord)
//   rank 0:     wait for every <key>/shard/<r>; decidePublication; commitManifest (the commit
//               point: only now is the checkpoint complete); prune to `keep`
//                                                           -> <key>/outcome
//   every rank: wait for <key>/outcome; the last to read it     -> <key>/all-read
//   rank 0:     wait for <key>/all-read (it hosts the store: no rank may be left asking a
//               store that ended with rank 0's process)
//
// So a checkpoint is complete only when every rank's shard is on disk, exactly as for a
// synchronous save, and every rank ends with the same outcome. Every wait is bounded by the
// job's timeout (a dead rank becomes an error naming it, never a hang).
//
// Threading: call from one thread per rank and job; the store is thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "bootstrap/store.h"
#include "checkpoint/publication.h"

namespace strata::checkpoint {

struct PublishJob {
  std::string root;       // checkpoint.dir
  ManifestHeader header;  // step, epoch, kind, world and pipeline sizes (createdUtc is filled here)
  int rank = 0;
  int ppRank = 0;
  int keep = 0;           // rank 0 prunes to the newest `keep` after publishing (0: keep all)
  std::string key;        // store key prefix: unique per save, equal on every rank
  std::chrono::milliseconds timeout{300000};
  // Writes this rank's shard into the checkpoint directory and returns it; empty when this
  // rank has no shard (a full checkpoint's ranks other than 0). May throw.
  std::function<ShardInfo(const std::string& ckptDir)> writeShard;
  // Whether to give up waiting for other ranks (the job's group failed: a dead peer will
  // never report). Checked every kAbandonCheck during each wait; empty: never.
  std::function<bool()> abandon;
};

// How often a wait on the store checks `abandon`. Waiting in slices also keeps a TCP store
// client (one request at a time per process) free for the training thread between them.
inline constexpr std::chrono::milliseconds kAbandonCheck{100};

struct PublishResult {
  bool ok = false;
  int64_t step = 0;
  std::string dir;    // the checkpoint directory
  std::string error;  // when !ok: what failed, naming the rank; the same text on every rank
};

// Runs this rank's part of the protocol. Never throws.
PublishResult publishThroughStore(bootstrap::Store& store, const PublishJob& job);

}  // namespace strata::checkpoint
