// The C++ element type of each DType the collectives reduce: dispatchDType(dtype, fn) calls
// fn(T{}) with that type (float, double, c10::Half, c10::BFloat16, int32_t, int64_t, uint8_t),
// so one template serves every element type. The others throw strata::Error.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>

#include "core/errors.h"
#include "strata/types.h"

namespace strata::collectives {

template <typename Fn>
void dispatchDType(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
    case DType::kFloat16: return fn(c10::Half{});
    case DType::kBFloat16: return fn(c10::BFloat16{});
    case DType::kInt32: return fn(int32_t{});
    case DType::kInt64: return fn(int64_t{});
    case DType::kUInt8: return fn(uint8_t{});
    case DType::kInt8:
    case DType::kInt16:
    case DType::kBool:
    case DType::kString: break;  // refused where a collective starts (isCollectiveDType)
  }
  STRATA_THROW(Error, "reduction of ", dtypeName(dtype), " buffers is not supported");
}

}  // namespace strata::collectives
