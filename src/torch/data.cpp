#include "strata/data.h"

#include <torch/serialize/tensor.h>
#include <torch/types.h>

#include "core/errors.h"
#include "runtime/sampler_plan.h"
#include "strata/distributed_model.h"
#include "torch/layer_instrumentation.h"

namespace strata {

DistributedSampler::DistributedSampler(size_t datasetSize, Options options)
    : datasetSize_(datasetSize), options_(options) {
  if (options_.rank < 0) options_.rank = dp_rank();
  if (options_.worldSize < 0) options_.worldSize = dp_size();
  STRATA_CHECK(options_.worldSize >= 1 && options_.rank < options_.worldSize, "DistributedSampler: rank ",
               options_.rank, " is not below world size ", options_.worldSize);
  reset();
  epochStarted_ = false;  // the loader's first reset() starts epoch 0, not 1
}

void DistributedSampler::reset(torch::optional<size_t> newSize) {
  if (newSize) datasetSize_ = *newSize;
  if (epochStarted_) ++epoch_;
  epochStarted_ = true;
  indices_ = data::shardIndices({datasetSize_, options_.rank, options_.worldSize, options_.seed, epoch_,
                                 options_.shuffle, options_.dropLast});
  position_ = 0;
}

torch::optional<std::vector<size_t>> DistributedSampler::next(size_t batchSize) {
  if (position_ >= indices_.size()) return torch::nullopt;
  instrument::batchRequested();  // profiler: data loading runs from here to the step's begin
  const size_t end = std::min(indices_.size(), position_ + batchSize);
  std::vector<size_t> batch(indices_.begin() + static_cast<std::ptrdiff_t>(position_),
                            indices_.begin() + static_cast<std::ptrdiff_t>(end));
  position_ = end;
  return batch;
}

void DistributedSampler::set_epoch(uint64_t epoch) {
  epoch_ = epoch;
  epochStarted_ = false;
  reset();
  epochStarted_ = false;
}

size_t DistributedSampler::samples_per_rank() const {
  return data::samplesPerRank(datasetSize_, options_.worldSize, options_.dropLast);
}

void DistributedSampler::save(torch::serialize::OutputArchive& archive) const {
  archive.write("epoch", torch::tensor(static_cast<int64_t>(epoch_)), /*is_buffer=*/true);
  archive.write("position", torch::tensor(static_cast<int64_t>(position_)), /*is_buffer=*/true);
}

void DistributedSampler::load(torch::serialize::InputArchive& archive) {
  torch::Tensor epoch = torch::empty({}, torch::kInt64), position = torch::empty({}, torch::kInt64);
  archive.read("epoch", epoch, /*is_buffer=*/true);
  archive.read("position", position, /*is_buffer=*/true);
  set_epoch(static_cast<uint64_t>(epoch.item<int64_t>()));
  epochStarted_ = true;
  position_ = static_cast<size_t>(position.item<int64_t>());
}

}  // namespace strata
