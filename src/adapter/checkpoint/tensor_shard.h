// By-path checkpoint files (internal to the torch adapter): a zip container written with
// libtorch's own PyTorchStreamWriter, one uncompressed record per tensor, one per
// parameter's optimizer state, one for Strata's state, and the index
// (checkpoint/tensor_index.h) that names them by parameter path.
//
// Unlike a torch::serialize archive, which is loaded whole, a reader here opens the zip's
// directory and copies one record straight into the tensor that needs it (a positioned read
// into the tensor's memory, no temporary): a rank of any layout reads its own stage's tensors
// and never allocates anyone else's.
//
// Threading: one thread per object.
#pragma once

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/types.h>

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "checkpoint/tensor_index.h"

namespace caffe2::serialize {
class PyTorchStreamWriter;
class PyTorchStreamReader;
}  // namespace caffe2::serialize

namespace strata::detail {

// "float32", "int64", ... (throws for a dtype a checkpoint does not store).
std::string dtypeName(c10::ScalarType type);
c10::ScalarType dtypeFromName(const std::string& name);
// The bytes of an index entry's tensor (its dtype times its shape).
size_t entryBytes(const checkpoint::TensorEntry& entry);

// The index entry a tensor would have (no record).
checkpoint::TensorEntry describeTensor(const std::string& path, const torch::Tensor& value, bool buffer);

// An OutputArchive as bytes (torch::serialize's own zip form).
std::string archiveBytes(torch::serialize::OutputArchive& archive);

class TensorShardWriter {
 public:
  using Sink = std::function<void(const void* data, size_t numBytes)>;
  explicit TensorShardWriter(Sink sink);
  ~TensorShardWriter();
  TensorShardWriter(const TensorShardWriter&) = delete;
  TensorShardWriter& operator=(const TensorShardWriter&) = delete;

  // Stores `value` under `path`. A tensor already stored (the same tensor under another path:
  // a tied weight) is recorded as an alias instead.
  void addTensor(const std::string& path, const torch::Tensor& value, bool buffer);
  // The same from raw bytes (a tensor streamed from another rank).
  void addTensorBytes(const checkpoint::TensorEntry& entry, const void* data, size_t numBytes);
  void addAlias(const checkpoint::TensorEntry& entry);
  // One parameter's optimizer state (and its group's options), as archive bytes.
  void addOptimizerState(const std::string& kind, const std::string& path, const std::string& bytes);
  void addState(const std::string& bytes);
  // Writes the index and the zip's directory. Nothing may be added afterwards.
  void finish();

 private:
  std::unique_ptr<caffe2::serialize::PyTorchStreamWriter> zip_;
  checkpoint::TensorIndex index_;
  std::map<const void*, std::string> stored_;  // TensorImpl -> path it was stored under
};

class TensorShardReader {
 public:
  // Opens `file` and reads its index. Throws strata::Error naming the file when it is not a
  // by-path checkpoint file or its index is invalid.
  explicit TensorShardReader(const std::string& file);
  ~TensorShardReader();
  // Whether `file` is in this form (a torch::serialize archive is not).
  static bool isTensorShard(const std::string& file);

  const checkpoint::TensorIndex& index() const { return index_; }
  bool has(const std::string& path) const { return entries_.count(path) > 0; }
  // Copies the stored tensor of `path` (an alias: its target's bytes) into `target`, which
  // must have the stored dtype and shape (else strata::Error naming the path and both).
  void readInto(const std::string& path, torch::Tensor& target);
  // The bytes of the stored tensor of `path` (the full-checkpoint streaming reads them).
  std::string readBytes(const std::string& path);
  // A record holding archive bytes (optimizer state, Strata's state).
  torch::serialize::InputArchive readArchive(const std::string& record);

 private:
  const checkpoint::TensorEntry& storedEntry(const std::string& path) const;

  std::string file_;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> zip_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> raw_;
  checkpoint::TensorIndex index_;
  std::map<std::string, const checkpoint::TensorEntry*> entries_;
};

}  // namespace strata::detail
