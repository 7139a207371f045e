#include "runtime/sampler_plan.h"

#include <numeric>
#include <random>

namespace strata::data {

size_t samplesPerRank(size_t datasetSize, int worldSize, bool dropLast) {
  const size_t n = static_cast<size_t>(worldSize);
  return dropLast ? datasetSize / n : (datasetSize + n - 1) / n;
}

std::vector<size_t> shardIndices(const ShardSpec& spec) {
  std::vector<size_t> order(spec.datasetSize);
  std::iota(order.begin(), order.end(), size_t{0});
  if (spec.shuffle) {
    // Our own Fisher-Yates over mt19937_64: std::shuffle's algorithm differs between
    // standard libraries, and every rank (and every rerun) must see the same order.
    std::mt19937_64 rng(spec.seed * 0x9E3779B97F4A7C15ull + spec.epoch);
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  }
  const size_t perRank = samplesPerRank(spec.datasetSize, spec.worldSize, spec.dropLast);
  const size_t total = perRank * static_cast<size_t>(spec.worldSize);
  for (size_t i = 0; order.size() < total && !order.empty(); ++i) order.push_back(order[i]);
  std::vector<size_t> mine;
  mine.reserve(perRank);
  for (size_t pos = static_cast<size_t>(spec.rank); pos < total; pos += static_cast<size_t>(spec.worldSize))
    mine.push_back(order[pos]);
  return mine;
}

}  // namespace strata::data
