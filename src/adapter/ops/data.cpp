#include "strata/data.h"

#include <torch/serialize/tensor.h>
#include <torch/types.h>

#include "core/errors.h"
#include "runtime/sampler_plan.h"
#include "strata/distributed_model.h"
#include "adapter/observe/observers.h"

namespace strata {

DistributedSampler::DistributedSampler(size_t datasetSize, Options options) : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.datasetSize = datasetSize;
  s.options = options;
  if (s.options.rank < 0) s.options.rank = dp_rank();
  if (s.options.worldSize < 0) s.options.worldSize = dp_size();
  STRATA_CHECK(s.options.worldSize >= 1 && s.options.rank < s.options.worldSize, "DistributedSampler: rank ",
               s.options.rank, " is not below world size ", s.options.worldSize);
  reset();
  s.epochStarted = false;  // the loader's first reset() starts epoch 0, not 1
}

void DistributedSampler::buildIndices() {
  State& s = *state_;
  s.indices = data::shardIndices({s.datasetSize, s.options.rank, s.options.worldSize, s.options.seed, s.epoch,
                                  s.options.shuffle, s.options.dropLast});
}

void DistributedSampler::reset(torch::optional<size_t> newSize) {
  State& s = *state_;
  if (s.resumePending && !newSize) {  // resuming: continue the restored epoch at its position
    s.resumePending = false;
    return;
  }
  s.resumePending = false;
  if (newSize) s.datasetSize = *newSize;
  if (s.epochStarted) ++s.epoch;
  s.epochStarted = true;
  buildIndices();
  s.position = 0;
}

torch::optional<std::vector<size_t>> DistributedSampler::next(size_t batchSize) {
  State& s = *state_;
  s.resumePending = false;  // driven directly after load(): the next reset() is a new epoch
  if (s.position >= s.indices.size()) return torch::nullopt;
  observe::observers().batchRequested();  // the profiler: data loading runs from here to the step's begin
  const size_t end = std::min(s.indices.size(), s.position + batchSize);
  std::vector<size_t> batch(s.indices.begin() + static_cast<std::ptrdiff_t>(s.position),
                            s.indices.begin() + static_cast<std::ptrdiff_t>(end));
  s.position = end;
  return batch;
}

void DistributedSampler::set_epoch(uint64_t epoch) {
  State& s = *state_;
  s.epoch = epoch;
  s.epochStarted = false;
  s.resumePending = false;
  reset();
  s.epochStarted = false;
}

size_t DistributedSampler::samples_per_rank() const {
  const State& s = *state_;
  return data::samplesPerRank(s.datasetSize, s.options.worldSize, s.options.dropLast);
}

void DistributedSampler::save(torch::serialize::OutputArchive& archive) const {
  archive.write("epoch", torch::tensor(static_cast<int64_t>(state_->epoch)), /*is_buffer=*/true);
  archive.write("position", torch::tensor(static_cast<int64_t>(state_->position)), /*is_buffer=*/true);
}

void DistributedSampler::load(torch::serialize::InputArchive& archive) {
  torch::Tensor epoch = torch::empty({}, torch::kInt64), position = torch::empty({}, torch::kInt64);
  archive.read("epoch", epoch, /*is_buffer=*/true);
  archive.read("position", position, /*is_buffer=*/true);
  State& s = *state_;
  s.epoch = static_cast<uint64_t>(epoch.item<int64_t>());
  s.epochStarted = true;
  buildIndices();
  s.position = std::min(s.indices.size(), static_cast<size_t>(position.item<int64_t>()));
  s.resumePending = true;
}

}  // namespace strata
