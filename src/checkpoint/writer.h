// The steps of writing one checkpoint, in the order that keeps it atomic across ranks:
//
//   rank 0:     dir = beginCheckpoint(root, step)    // mkdir; drop a stale manifest
//   (barrier)
//   every rank: info = writeShard(dir, file, bytes)  // temp file, fsync, rename, fsync dir
//   (gather every rank's ShardInfo to rank 0)
//   rank 0:     commitManifest(dir, manifest)        // the manifest last, atomically
//               pruneCheckpoints(root, keep)
//
// A crash anywhere before commitManifest leaves a directory without a manifest, which the
// finder skips and the next prune removes.
#pragma once

#include <functional>
#include <string>

#include "checkpoint/manifest.h"

namespace strata::checkpoint {

// Creates <root>/step-<step>/ and removes a manifest left there (re-saving a step must not
// look complete while its shards are rewritten). Returns the directory.
std::string beginCheckpoint(const std::string& root, int64_t step);

// Streams a shard through `produce`, which calls `sink(data, size)` as often as it likes.
// Returns its ShardInfo (rank and ppRank left 0 for the caller to fill).
using ByteSink = std::function<void(const void* data, size_t size)>;
ShardInfo writeShard(const std::string& dir, const std::string& file, const std::function<void(const ByteSink&)>& produce);

// Writes manifest.json atomically (the commit point of the checkpoint).
void commitManifest(const std::string& dir, const Manifest& manifest);

// Current UTC time as "2026-11-22T03:04:05Z".
std::string utcNow();

}  // namespace strata::checkpoint
