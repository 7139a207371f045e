// Which elements of which parameters this rank steps when the parameters are one copy per
// host (dataparallel.host_shared_parameters, docs/collectives.md "Host-shared parameters").
// Pure; tested in tests/collectives/param_slices_test.
//
// Parameters and their gradients are laid out bucket by bucket, as the gradient reducer's
// flat buckets; each bucket is reduce-scattered into shards (Group::sharedShard), and the
// rank that reduced a shard steps exactly those elements. A parameter that straddles a shard
// boundary is stepped in pieces by two ranks: the optimizers this is used with (SGD, Adam,
// AdamW, Adagrad, RMSprop) are element-wise, so the pieces get the same arithmetic as the
// whole tensor.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/shard_plan.h"

namespace strata::collectives {

// A parameter's place in the buckets: bucket index, first element in the bucket, elements.
struct ParamPlace {
  int bucket = 0;
  size_t offset = 0;
  size_t count = 0;
};

// One contiguous piece of one parameter inside this rank's shard.
struct ParamSlice {
  int param = 0;            // index into the places
  size_t paramOffset = 0;   // first element within the parameter
  size_t bucketOffset = 0;  // first element within its bucket
  size_t count = 0;
};

// The pieces of every parameter that fall inside `shardOfBucket[b]` (this rank's shard of
// bucket b), in parameter order. Empty parameters and empty shards give no pieces.
std::vector<ParamSlice> sliceParameters(const std::vector<ParamPlace>& places, const std::vector<Range>& shardOfBucket);

}  // namespace strata::collectives
