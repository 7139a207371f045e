// The checkpoint manifest: what a checkpoint holds and how to check it is whole. It is
// written last, so a checkpoint without a valid manifest is incomplete by definition.
//
//   <checkpoint.dir>/step-000000000120/
//     manifest.json          {"format": "strata-checkpoint", "version": 1, "step": 120, ...}
//     model.pt               kind "full":    one file, rank 0 (loadable by plain libtorch)
//     rank-00000.pt ...      kind "partial": one shard per rank (its pipeline stage)
//
// Everything here is pure (no I/O) and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata::checkpoint {

inline constexpr const char* kManifestFormat = "strata-checkpoint";
inline constexpr int kManifestVersion = 1;
inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kFullShardFile = "model.pt";

enum class Kind { kFull, kPartial };
const char* kindName(Kind kind);

struct ShardInfo {
  std::string file;    // relative to the checkpoint directory, no '/'
  int rank = 0;        // the world rank that wrote it
  int ppRank = 0;      // its pipeline stage (0 without model parallelism)
  uint64_t bytes = 0;
  std::string sha256;  // 64 lowercase hex digits
};

struct Manifest {
  int64_t step = 0;    // training steps completed when it was taken
  int64_t epoch = 0;
  Kind kind = Kind::kFull;
  int worldSize = 1;
  int ppSize = 1;      // pipeline stages
  int dpSize = 1;      // data-parallel replicas
  std::vector<ShardInfo> shards;
  std::string createdUtc;  // ISO 8601, informational
};

nlohmann::json toJson(const Manifest& manifest);
// Parses and validates: format, version, every field's type and range, shard file names
// (no path separators, no duplicates), a full checkpoint's single shard, a partial one's
// shard per rank. Throws strata::Error naming `source`, the field and the value.
Manifest parseManifest(const std::string& jsonText, const std::string& source);

// "step-000000000120": fixed width, so names sort like steps.
std::string checkpointDirName(int64_t step);
// The step of a checkpoint directory name; nullopt for anything else.
std::optional<int64_t> parseCheckpointDirName(const std::string& name);
// "rank-00003.pt".
std::string partialShardFile(int rank);

}  // namespace strata::checkpoint
