#include "pipeline/topology.h"

#include "core/errors.h"
#include "core/named_values.h"

namespace strata::pipeline {

constexpr NamedValue<Placement> kPlacements[] = {{Placement::kCluster, "cluster"}, {Placement::kSpread, "spread"}};

Placement parsePlacement(const std::string& name) {
  return parseNamed(kPlacements, name, "placement_strategy: unknown value");
}

const char* placementName(Placement placement) { return nameOf(kPlacements, placement); }

Topology makeTopology(int worldSize, int partitions, Placement placement) {
  if (worldSize < 1) STRATA_THROW(ConfigError, "world size must be >= 1, got ", worldSize);
  if (partitions < 1) STRATA_THROW(ConfigError, "partitions must be >= 1, got ", partitions);
  if (worldSize % partitions != 0)
    STRATA_THROW(ConfigError, "partitions=", partitions, " does not divide the world size ", worldSize,
                 " (world = partitions x data-parallel size)");
  Topology t;
  t.worldSize = worldSize;
  t.partitions = partitions;
  t.dataParallelSize = worldSize / partitions;
  t.placement = placement;
  t.ppRankOf.resize(static_cast<size_t>(worldSize));
  t.dpRankOf.resize(static_cast<size_t>(worldSize));
  t.pipelineGroups.assign(static_cast<size_t>(t.dataParallelSize), std::vector<int>(static_cast<size_t>(partitions)));
  t.dataParallelGroups.assign(static_cast<size_t>(partitions), std::vector<int>(static_cast<size_t>(t.dataParallelSize)));
  for (int rank = 0; rank < worldSize; ++rank) {
    const bool cluster = placement == Placement::kCluster;
    const int pp = cluster ? rank % partitions : rank / t.dataParallelSize;
    const int dp = cluster ? rank / partitions : rank % t.dataParallelSize;
    t.ppRankOf[static_cast<size_t>(rank)] = pp;
    t.dpRankOf[static_cast<size_t>(rank)] = dp;
    t.pipelineGroups[static_cast<size_t>(dp)][static_cast<size_t>(pp)] = rank;
    t.dataParallelGroups[static_cast<size_t>(pp)][static_cast<size_t>(dp)] = rank;
  }
  return t;
}

}  // namespace strata::pipeline
