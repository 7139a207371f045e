// The layers each pipeline rank profiles before the plan exists (issue 14: costs measured
// "on the ranks that own the layers when the model is not materialised in one place").
//
// The final partition needs every layer's measured cost, and the costs are measured by the
// ranks that will probably own the layers: a provisional contiguous split, one block per
// pipeline rank, balanced by what is known before anything is built. Each rank builds and
// profiles only its block, all ranks at once (so the profile sees the contention of a run),
// the per-layer figures are gathered, and the exact partitioner cuts the model from the full
// table. A provisional layer that the final partition gives to another rank is freed before
// the optimizer exists.
#pragma once

#include <cstddef>
#include <vector>

namespace strata::pipeline {

struct LayerRange {
  int begin = 0;
  int end = 0;  // exclusive

  int numLayers() const { return end - begin; }
  bool contains(int layer) const { return layer >= begin && layer < end; }
  bool operator==(const LayerRange& o) const { return begin == o.begin && end == o.end; }
};

// One contiguous, non-empty range per pipeline rank, in rank order, covering [0, numLayers).
// layerBytes: every layer's parameter bytes when known before profiling (a model built whole);
// the largest range's bytes are minimised (the memory-optimised partitioner, exact). Empty (a
// LayerList, nothing built yet) or all zero: an even split by layer count, the first
// numLayers % partitions ranks holding one layer more. Throws strata::ConfigError when
// partitions < 1 or partitions > numLayers, or layerBytes has a size other than numLayers.
std::vector<LayerRange> provisionalSplit(int numLayers, int partitions, const std::vector<size_t>& layerBytes = {});

}  // namespace strata::pipeline
