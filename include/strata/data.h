// A distributed sampler for torch::data datasets.
//
// Each data-parallel rank reads a disjoint shard (padded so every rank gets the same
// number of samples, or with drop_last the uneven tail dropped), in an order shuffled
// per epoch and identical on every rank. libtorch's DataLoader keeps its own copy of the
// sampler, so calling set_epoch() on yours has no effect once a loader holds it
// (pytorch/pytorch#73141); this sampler therefore advances its epoch by itself each time
// the loader resets it (every `for (auto& batch : *loader)`), and set_epoch() is only
// needed to start elsewhere (resuming).
#pragma once

#include <torch/data/samplers/base.h>
#include <torch/serialize/archive.h>

#include <cstdint>
#include <vector>

namespace strata {

class DistributedSampler : public torch::data::samplers::Sampler<std::vector<size_t>> {
 public:
  struct Options {
    bool shuffle = true;
    bool dropLast = false;
    uint64_t seed = 0;
    int rank = -1;       // default: strata::dp_rank()
    int worldSize = -1;  // default: strata::dp_size()
  };
  explicit DistributedSampler(size_t datasetSize, Options options);
  explicit DistributedSampler(size_t datasetSize) : DistributedSampler(datasetSize, Options{}) {}

  void reset(torch::optional<size_t> newSize = torch::nullopt) override;
  torch::optional<std::vector<size_t>> next(size_t batchSize) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

  // The epoch the next reset() starts.
  void set_epoch(uint64_t epoch);
  uint64_t epoch() const { return epoch_; }
  size_t samples_per_rank() const;
  // Position within the current epoch (for checkpoints).
  size_t position() const { return position_; }

 private:
  size_t datasetSize_;
  Options options_;
  uint64_t epoch_ = 0;
  bool epochStarted_ = false;
  std::vector<size_t> indices_;
  size_t position_ = 0;
};

}  // namespace strata
