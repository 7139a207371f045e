// Typed CPU reduction loops behind one dtype switch (templates stay in the .cpp).
//
// Every rank must get bit-identical results, so sources are always combined in the
// order given (rank order); 16-bit floats are accumulated in float32 and rounded once.
#pragma once

#include <cstddef>

#include "strata/types.h"

namespace strata::collectives {

// out[i] = srcs[0][i] op srcs[1][i] op ... op srcs[numSrcs-1][i], combined left to right.
// For ReduceOp::kAvg the sum is divided by `avgDivisor`. `out` may be any one of the
// sources (same elements: an in-place reduction), never partly overlap one.
void reduceMany(ReduceOp op, DType dtype, void* out, const void* const* srcs, int numSrcs,
                size_t count, int avgDivisor);

// inout[i] = inout[i] op in[i] (kAvg accumulates a sum; call finishAvg at the end).
void reduceInto(ReduceOp op, DType dtype, void* inout, const void* in, size_t count);

// data[i] /= divisor (the last step of an AllReduce with kAvg done as repeated sums).
void finishAvg(DType dtype, void* data, size_t count, int divisor);

}  // namespace strata::collectives
