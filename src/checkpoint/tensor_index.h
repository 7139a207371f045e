// The index of a by-path checkpoint file: which tensors it holds, under which parameter
// path, with which dtype and shape, and in which record of the file; the optimizer state
// records, also by path. A file in this form can be read tensor by tensor, so a rank of any
// layout reads exactly the tensors of its own stage and nothing else (docs/checkpoints.md,
// "Checkpoints across layouts").
//
// The JSON form (the file's "strata-index.json" record):
//   {"format": "strata-tensor-shard", "version": 1,
//    "tensors": [{"path": "embed.token.weight", "dtype": "float32", "shape": [256, 128],
//                 "record": "t0"},
//                {"path": "head.weight", "dtype": "float32", "shape": [256, 128],
//                 "alias_of": "embed.token.weight"}, ...],
//    "optimizer": {"kind": "AdamW", "entries": [{"path": "embed.token.weight", "record": "o0"}]},
//    "state": "state"}
// A tied tensor is stored once; its other paths are aliases. "buffer": true marks buffers.
//
// Everything here is pure (no I/O, no libtorch) and thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata::checkpoint {

inline constexpr const char* kTensorIndexFormat = "strata-tensor-shard";
inline constexpr int kTensorIndexVersion = 1;
inline constexpr const char* kTensorIndexRecord = "strata-index.json";

struct TensorEntry {
  std::string path;             // the tensor's path in the model ("blocks.3.attn.qkv.weight")
  std::string dtype;            // "float32", ...
  std::vector<int64_t> shape;
  std::string record;           // the record holding its bytes (empty for an alias)
  std::string aliasOf;          // non-empty: the same tensor as that path (a tied weight)
  bool buffer = false;
};

struct OptimizerEntry {
  std::string path;
  std::string record;
};

struct TensorIndex {
  std::vector<TensorEntry> tensors;
  std::string optimizerKind;  // "" when the file holds no optimizer state
  std::vector<OptimizerEntry> optimizer;
  std::string stateRecord;    // Strata's own state (counters, RNG, sampler); "" when absent
};

nlohmann::json toJson(const TensorIndex& index);
// Validates format, version, types, unique paths, aliases naming a stored path with the
// same dtype and shape. Throws strata::Error naming `source`, the field and the value.
TensorIndex parseTensorIndex(const std::string& jsonText, const std::string& source);

// "[256, 128]".
std::string formatShape(const std::vector<int64_t>& shape);

// The first difference between the tensors a checkpoint holds and a model's, comparing
// paths, dtypes and shapes in sorted path order (aliases count as paths; duplicates of a path
// must agree and are compared once). nullopt when they match. Examples:
//   "blocks.0.mlp.fc.weight" has shape [512, 128] in the checkpoint, [256, 64] in the model
//   the model has "blocks.4.ln1.weight", which the checkpoint does not
//   the checkpoint has "blocks.9.ln1.weight", which the model does not
std::optional<std::string> firstDifference(const std::vector<TensorEntry>& checkpoint,
                                           const std::vector<TensorEntry>& model);

// Where the tensors and optimizer states of a checkpoint are among its shards (one
// TensorIndex per shard file). A path stored in several shards (data-parallel replicas, the
// copies of a tied weight on two pipeline ranks) is taken from the preferred shard when it
// holds it, else from the lowest shard that does; all copies hold the same values.
class ShardCatalog {
 public:
  struct Location {
    size_t shard = 0;
    std::string storedPath;  // the path whose record holds the bytes: `path`, or its alias target
  };
  struct Record {
    size_t shard = 0;
    std::string record;
  };

  // `files` names the shards in errors. Throws strata::Error naming both files when two
  // shards list a path with different dtypes or shapes, or hold different optimizer kinds.
  ShardCatalog(const std::vector<TensorIndex>& shards, const std::vector<std::string>& files, size_t preferred);

  std::optional<Location> tensor(const std::string& path) const;
  // The record of `path`'s optimizer state: the entry of the path or of the tensor it is an
  // alias of, in the first shard (in preference order) that has one.
  std::optional<Record> optimizerState(const std::string& path) const;
  // One entry per path, as firstDifference compares them with a model's.
  std::vector<TensorEntry> entries() const;
  // The optimizer kind of the shards that hold optimizer state ("" when none does).
  const std::string& optimizerKind() const { return optimizerKind_; }

 private:
  std::vector<std::map<std::string, std::string>> optimizerOfShard_;  // per shard: path -> record
  std::map<std::string, std::vector<Location>> locations_;             // preference order
  std::map<std::string, TensorEntry> entries_;
  std::string optimizerKind_;
};

}  // namespace strata::checkpoint
