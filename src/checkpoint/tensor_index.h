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

}  // namespace strata::checkpoint
