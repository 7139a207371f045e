#include "collectives/param_slices.h"

#include <algorithm>

#include "core/errors.h"

namespace strata::collectives {

std::vector<ParamSlice> sliceParameters(const std::vector<ParamPlace>& places, const std::vector<Range>& shardOfBucket) {
  std::vector<ParamSlice> slices;
  for (size_t i = 0; i < places.size(); ++i) {
    const ParamPlace& p = places[i];
    STRATA_CHECK(p.bucket >= 0 && static_cast<size_t>(p.bucket) < shardOfBucket.size(), "parameter ", i,
                 " is in bucket ", p.bucket, " of ", shardOfBucket.size());
    const Range& shard = shardOfBucket[static_cast<size_t>(p.bucket)];
    const size_t begin = std::max(p.offset, shard.offset);
    const size_t end = std::min(p.offset + p.count, shard.end());
    if (begin >= end) continue;
    slices.push_back({static_cast<int>(i), begin - p.offset, begin, end - begin});
  }
  return slices;
}

}  // namespace strata::collectives
