// The checkpoints under one root directory (checkpoint.dir): listing, verifying, finding the
// newest complete one, and pruning to the newest K.
//
// A checkpoint is COMPLETE when its manifest parses and validates and every shard it lists
// is present with the listed size and SHA-256. Anything else (no manifest yet because the
// writer died, a truncated or corrupted shard, a missing file) is skipped with a logged
// reason, and the next older checkpoint is tried.
//
// Threading: free functions, safe to call concurrently on distinct roots. Only rank 0 prunes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/manifest.h"

namespace strata::checkpoint {

struct Entry {
  int64_t step = 0;
  std::string path;          // the checkpoint directory
  bool hasManifest = false;  // cheap check only (the file exists)
};

// Checkpoint directories under root, newest step first. A missing root: empty.
std::vector<Entry> listCheckpoints(const std::string& root);

struct Verdict {
  bool complete = false;
  std::string why;  // when not complete: the first problem found
  Manifest manifest;
};

// Checks one checkpoint directory; with checksums, re-hashes every shard (reads it all).
// Never throws for a bad checkpoint (that is the verdict); throws only on misuse.
Verdict verifyCheckpoint(const std::string& dir, bool checksums = true);

struct Found {
  std::string path;
  Manifest manifest;
  std::vector<std::string> skipped;  // "<dir>: <why>" for every newer incomplete one
};

// The newest complete checkpoint under root (logging each skipped one at WARN), or nullopt.
std::optional<Found> findNewestComplete(const std::string& root);

// Pure: which steps to delete so that only the `keep` newest checkpoints that have a
// manifest remain (keep <= 0 keeps everything). Directories without a manifest older than the
// newest complete one (torn writes of crashed runs) are deleted too, unless keep <= 0; newer
// ones may be a write in progress and stay. Input in any order.
std::vector<int64_t> stepsToPrune(const std::vector<Entry>& entries, int keep);

// Deletes what stepsToPrune chooses (each manifest first, so a half-deleted checkpoint
// never looks complete). Returns the directories removed. Failures are logged, not thrown (pruning is housekeeping).
std::vector<std::string> pruneCheckpoints(const std::string& root, int keep);

}  // namespace strata::checkpoint
