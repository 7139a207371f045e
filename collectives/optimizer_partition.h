// Which data-parallel rank keeps the optimizer state of which parameter (sharded optimizer
// state, ZeRO stage 1). Pure; tested in tests/collectives/optimizer_partition_test.
//
// Whole parameters are assigned, never slices of one: the owner then runs the wrapped
// optimizer's own math on exactly the tensor an unsharded run would step, so sharded and
// unsharded training agree bit for bit. Greedy by size, as PyTorch's
// ZeroRedundancyOptimizer: largest parameter first (ties: lower index first), each to the
// rank holding the fewest bytes so far (ties: lower rank). Every rank computes the same
// assignment from the same sizes.
#pragma once

#include <cstddef>
#include <vector>

namespace strata::collectives {

// owner[i] in [0, parts) for each parameter i of `numBytes`. parts >= 1.
std::vector<int> partitionParameters(const std::vector<size_t>& numBytes, int parts);

// Bytes each of `parts` ranks owns under `owner`.
std::vector<size_t> bytesPerPart(const std::vector<size_t>& numBytes, const std::vector<int>& owner, int parts);

}  // namespace strata::collectives
