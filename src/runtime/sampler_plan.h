// Which dataset indices a data-parallel rank reads in an epoch (pure; tested).
//
// As torch.utils.data.DistributedSampler: one permutation of [0, size) per epoch, seeded
// by (seed, epoch) and identical on every rank; rank r takes positions r, r+n, r+2n...
// With dropLast the tail that does not divide evenly is dropped; otherwise the list is
// padded with indices from its start, so every rank gets the same number of samples.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::data {

struct ShardSpec {
  size_t datasetSize = 0;
  int rank = 0;
  int worldSize = 1;
  uint64_t seed = 0;
  uint64_t epoch = 0;
  bool shuffle = true;
  bool dropLast = false;
};

std::vector<size_t> shardIndices(const ShardSpec& spec);
// Samples per rank per epoch.
size_t samplesPerRank(size_t datasetSize, int worldSize, bool dropLast);

}  // namespace strata::data
