// Seeded inputs and a naive reference for the collectives tests: every rank's input is a
// small integer stored in the element type, so sums and products are exact in every
// type and results can be compared with ASSERT_EQ.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/dtype_dispatch.h"
#include "strata/types.h"

namespace strata::testing {

// Input element i of `rank`: 1..5 for sums, 1..2 for products (2^8 fits every type).
inline double inputValue(int rank, size_t i, ReduceOp op) {
  return op == ReduceOp::kProd ? 1.0 + static_cast<double>((rank + i) % 2)
                               : 1.0 + static_cast<double>((rank * 7 + i) % 5);
}


// The bytes of `count` inputs of `rank`.
inline std::vector<uint8_t> makeInput(int rank, size_t count, DType dtype, ReduceOp op) {
  std::vector<uint8_t> bytes(count * dtypeBytes(dtype));
  collectives::dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = reinterpret_cast<T*>(bytes.data());
    for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(static_cast<float>(inputValue(rank, i, op)));
  });
  return bytes;
}

// Naive reference: combine every rank's value in double, then convert (avg divides in the
// element type's own arithmetic, as the kernels do).
inline std::vector<uint8_t> referenceAllReduce(int worldSize, size_t count, DType dtype, ReduceOp op) {
  std::vector<uint8_t> bytes(count * dtypeBytes(dtype));
  collectives::dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = reinterpret_cast<T*>(bytes.data());
    for (size_t i = 0; i < count; ++i) {
      double acc = inputValue(0, i, op);
      for (int r = 1; r < worldSize; ++r) {
        const double v = inputValue(r, i, op);
        switch (op) {
          case ReduceOp::kSum:
          case ReduceOp::kAvg: acc += v; break;
          case ReduceOp::kProd: acc *= v; break;
          case ReduceOp::kMax: acc = std::max(acc, v); break;
          case ReduceOp::kMin: acc = std::min(acc, v); break;
        }
      }
      if constexpr (std::is_same_v<T, uint8_t>) {
        const uint8_t wrapped = static_cast<uint8_t>(static_cast<uint64_t>(acc));
        p[i] = op == ReduceOp::kAvg ? static_cast<uint8_t>(wrapped / worldSize) : wrapped;
      } else if constexpr (std::is_integral_v<T>) {
        p[i] = op == ReduceOp::kAvg ? static_cast<T>(static_cast<T>(acc) / worldSize) : static_cast<T>(acc);
      } else if constexpr (std::is_same_v<T, double>) {
        p[i] = op == ReduceOp::kAvg ? acc / worldSize : acc;
      } else {
        const float f = static_cast<float>(acc);
        p[i] = static_cast<T>(op == ReduceOp::kAvg ? f / static_cast<float>(worldSize) : f);
      }
    }
  });
  return bytes;
}

// Index of the first differing element, or -1.
inline long firstMismatch(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, DType dtype) {
  const size_t elem = dtypeBytes(dtype);
  for (size_t i = 0; i * elem < a.size(); ++i)
    if (std::memcmp(a.data() + i * elem, b.data() + i * elem, elem) != 0) return static_cast<long>(i);
  return a.size() == b.size() ? -1 : 0;
}

}  // namespace strata::testing
