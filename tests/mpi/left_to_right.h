// Random float inputs and the naive deterministic reference of the zero-copy reductions
// (shared_buffer_mpi_test, reduce_scatter_shared_mpi_test): x_0 + x_1 + ... + x_{n-1}
// summed left to right in rank order, divided by n for the average.
#pragma once

#include <mpi.h>

#include <cstring>
#include <random>
#include <vector>

#include "strata/types.h"

namespace strata::testing {

// Normal(0, 100) floats, seeded by `seed` and the rank; `all` receives every rank's, by rank.
inline std::vector<float> randomFloatsOfEveryRank(size_t count, unsigned seed, int rank, std::vector<float>& all) {
  std::mt19937 rng(seed + static_cast<unsigned>(rank));
  std::normal_distribution<float> dist(0.f, 100.f);
  std::vector<float> input(count);
  for (float& v : input) v = dist(rng);
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  all.resize(count * static_cast<size_t>(n));
  MPI_Allgather(input.data(), static_cast<int>(count), MPI_FLOAT, all.data(), static_cast<int>(count), MPI_FLOAT,
                MPI_COMM_WORLD);
  return input;
}

// The elements of `result` whose bits differ from the left-to-right reduction of `all`.
inline size_t differFromLeftToRight(const std::vector<float>& all, size_t count, ReduceOp op, const float* result) {
  const size_t n = all.size() / count;
  size_t differ = 0;
  for (size_t i = 0; i < count; ++i) {
    float sum = all[i];
    for (size_t r = 1; r < n; ++r) sum += all[r * count + i];
    if (op == ReduceOp::kAvg) sum /= static_cast<float>(n);
    differ += std::memcmp(&sum, &result[i], sizeof(float)) != 0;
  }
  return differ;
}

}  // namespace strata::testing
