// The rank layout helpers of the public API (SageMaker's names), from the job config: with
// model parallelism the world is pp_size() x dp_size() ranks (modelparallel.placement_strategy).
#include "pipeline/topology.h"
#include "runtime/runtime_internal.h"
#include "strata/distributed_model.h"
#include "strata/runtime.h"

namespace strata {
namespace {

pipeline::Topology jobTopology() {
  const config::ModelParallelConfig& mp = runtime::jobConfig().modelParallel;
  return pipeline::makeTopology(size(), mp.enabled ? mp.partitions : 1, pipeline::parsePlacement(mp.placementStrategy));
}

}  // namespace

int dp_rank() { return jobTopology().dpRankOf.at(static_cast<size_t>(rank())); }
int dp_size() { return jobTopology().dataParallelSize; }
int pp_rank() { return jobTopology().ppRankOf.at(static_cast<size_t>(rank())); }
int pp_size() { return jobTopology().partitions; }
double scale_lr(double baseLr) { return baseLr * dp_size(); }

}  // namespace strata
