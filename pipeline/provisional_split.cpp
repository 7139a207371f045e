#include "pipeline/provisional_split.h"

#include <algorithm>

#include "core/errors.h"
#include "pipeline/partitioner.h"

namespace strata::pipeline {

std::vector<LayerRange> provisionalSplit(int numLayers, int partitions, const std::vector<size_t>& layerBytes) {
  STRATA_CHECK_WITH(ConfigError, partitions >= 1 && partitions <= numLayers, "provisional split: ", partitions,
                    " pipeline ranks for ", numLayers, " layers; every rank needs at least one");
  STRATA_CHECK_WITH(ConfigError, layerBytes.empty() || layerBytes.size() == static_cast<size_t>(numLayers),
                    "provisional split: ", layerBytes.size(), " layer sizes for ", numLayers, " layers");
  std::vector<LayerRange> ranges;
  const bool known = std::any_of(layerBytes.begin(), layerBytes.end(), [](size_t b) { return b > 0; });
  if (!known) {
    const int base = numLayers / partitions, extra = numLayers % partitions;
    int begin = 0;
    for (int r = 0; r < partitions; ++r) {
      const int end = begin + base + (r < extra ? 1 : 0);
      ranges.push_back({begin, end});
      begin = end;
    }
    return ranges;
  }
  // Parameter bytes as the only cost: the memory objective minimises the largest block.
  std::vector<LayerCost> costs(layerBytes.size());
  for (size_t i = 0; i < costs.size(); ++i) costs[i].parameterBytes = layerBytes[i];
  PartitionOptions options;
  options.objective = Objective::kMemory;
  const Partition cut = partition(costs, partitions, options);
  TORCH_INTERNAL_ASSERT(cut.ok, "provisional split: no partition without a cap: ", cut.reason);
  for (const StagePlan& s : cut.stages) ranges.push_back({s.firstLayer, s.endLayer});
  return ranges;
}

}  // namespace strata::pipeline
