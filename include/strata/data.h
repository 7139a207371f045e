// A distributed sampler for torch::data datasets.
//
// Each data-parallel rank reads a disjoint shard (padded so every rank gets the same
// number of samples, or with drop_last the uneven tail dropped), in an order shuffled
// per epoch and identical on every rank. The sampler advances its epoch by itself each time
// the loader resets it (every `for (auto& batch : *loader)`).
//
// libtorch's DataLoader keeps its own copy of the sampler (pytorch/pytorch#73141); copies of
// a DistributedSampler share one state, so set_epoch() on yours reaches the loader's copy,
// and a checkpoint of yours saves the position the loader reached. After load() (resuming
// mid-epoch) the next reset() keeps the restored epoch and position instead of starting a
// new epoch, so a loader's first `for` continues where the checkpoint left off. Positions are
// exact with DataLoaderOptions().workers(0) (the default); with worker threads the loader
// has already asked for up to max_jobs batches ahead.
#pragma once

#include <torch/data/samplers/base.h>
#include <torch/serialize/archive.h>

#include <cstdint>
#include <memory>
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
  uint64_t epoch() const { return state_->epoch; }
  size_t samples_per_rank() const;
  // Position within the current epoch (for checkpoints).
  size_t position() const { return state_->position; }

 private:
  struct State {
    size_t datasetSize = 0;
    Options options;
    uint64_t epoch = 0;
    bool epochStarted = false;
    bool resumePending = false;  // load() happened: the next reset() continues its epoch
    std::vector<size_t> indices;
    size_t position = 0;
  };
  std::shared_ptr<State> state_;  // shared by copies (the DataLoader's included)

  void buildIndices();
};

}  // namespace strata
