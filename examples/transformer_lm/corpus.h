// The training text and the order the model reads it in.
//
// Corpus: every plain-text file of a folder (Debian's `fortunes` package by default:
// ~2.5 MB of English quotations under /usr/share/games/fortunes), in file-name order, as
// bytes (the tokens: vocab 256). The strfile index files (*.dat) and the *.u8 symlinks are
// skipped; the "%" lines between fortunes become blank lines. The last 5% of the bytes are
// held out for validation.
//
// WindowOrder: the data order is a pure function of (seed, sample index), so every layout
// (one process, data parallel, pipeline, hybrid) and every resumed run reads exactly the same
// global batches. Sample i of the endless stream is window perm_e[j] of epoch e = i / W
// (j = i mod W), where W windows of seq_len+1 bytes tile the text from an epoch-dependent
// shift, and perm_e is a Fisher-Yates shuffle driven by splitmix64(seed, e). Step s's global
// batch is samples s·B .. s·B+B−1; data-parallel rank r of d reads the r-th contiguous slice
// of B/d of them.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace lm {

constexpr const char* kDefaultCorpusDir = "/usr/share/games/fortunes";

// The corpus bytes. Throws std::runtime_error naming the folder when it has no text files.
std::vector<uint8_t> readCorpus(const std::string& dir);

class WindowOrder {
 public:
  // Windows of seqLen + 1 bytes (inputs and the next-byte targets) over numBytes bytes.
  // Throws std::invalid_argument when the text holds fewer than 2 windows.
  WindowOrder(int64_t numBytes, int64_t seqLen, uint64_t seed);
  // Start offset of sample `index` of the stream. Pure (cached per epoch).
  int64_t start(int64_t index);
  int64_t windowsPerEpoch() const { return windows_; }

 private:
  int64_t seqLen_;
  uint64_t seed_;
  int64_t windows_;
  int64_t cachedEpoch_ = -1;
  int64_t shift_ = 0;
  std::vector<int64_t> perm_;
};

struct Batch {
  torch::Tensor tokens;   // [b, T] int64
  torch::Tensor targets;  // [b, T] int64: the next byte of every position
};

class TextData {
 public:
  TextData(std::vector<uint8_t> bytes, int64_t seqLen, uint64_t seed);
  // This data-parallel rank's slice of step `step`'s global batch of `globalBatch` samples.
  Batch trainBatch(int64_t step, int64_t globalBatch, int dpRank, int dpSize);
  // Validation batch `index` (fixed windows of the held-out tail, in order), this rank's slice.
  Batch validationBatch(int64_t index, int64_t globalBatch, int dpRank, int dpSize) const;
  int64_t trainBytes() const { return trainBytes_; }
  int64_t validationBytes() const { return static_cast<int64_t>(bytes_.size()) - trainBytes_; }
  int64_t validationBatches(int64_t globalBatch) const;

 private:
  Batch gather(const std::vector<int64_t>& starts) const;

  std::vector<uint8_t> bytes_;
  int64_t seqLen_;
  int64_t trainBytes_;
  WindowOrder order_;
};

}  // namespace lm
