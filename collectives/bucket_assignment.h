// Which gradients share an AllReduce bucket (pure; tested in tests/core).
//
// As PyTorch DDP's Reducer: parameters are taken in the order their gradients are
// expected to become ready (reverse registration order at first, the observed order once
// it is known), cut into buckets of at most `capBytes` (the first bucket smaller,
// `firstCapBytes`, so communication starts early in backward), never mixing dtypes. Every
// rank computes the same assignment from the same inputs, so bucket i means the same
// parameters everywhere.
#pragma once

#include <cstddef>
#include <vector>

#include "strata/types.h"

namespace strata::collectives {

struct ParamInfo {
  size_t numBytes = 0;
  DType dtype = DType::kFloat32;
};

struct Bucket {
  std::vector<int> params;   // indices into the parameter list, in bucket order
  size_t numBytes = 0;
  DType dtype = DType::kFloat32;
};

// `order` lists parameter indices in expected ready order (empty: reverse of the list).
// A parameter larger than the cap gets a bucket of its own.
std::vector<Bucket> assignBuckets(const std::vector<ParamInfo>& params, const std::vector<int>& order,
                                  size_t firstCapBytes, size_t capBytes);

// The default expected ready order: last registered parameter first.
std::vector<int> reverseOrder(size_t numParams);

}  // namespace strata::collectives
