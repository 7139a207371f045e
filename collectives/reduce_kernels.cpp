#include "collectives/reduce_kernels.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "collectives/dtype_dispatch.h"
#include "core/errors.h"

namespace strata::collectives {
namespace {

// Elements reduced per block: the float accumulator stays in L1.
constexpr size_t kBlockElems = 2048;

template <typename T>
struct AccType {
  using type = T;
};
template <>
struct AccType<c10::Half> {
  using type = float;
};
template <>
struct AccType<c10::BFloat16> {
  using type = float;
};
// Integer sums and products wrap (two's complement) instead of overflowing into UB.
template <>
struct AccType<int32_t> {
  using type = uint32_t;
};
template <>
struct AccType<int64_t> {
  using type = uint64_t;
};

template <typename Acc, typename T>
inline Acc toAcc(T v) {
  if constexpr (std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>) {
    return static_cast<float>(v);
  } else {
    return static_cast<Acc>(v);
  }
}

template <typename T, typename Acc>
inline T fromAcc(Acc v) {
  return static_cast<T>(v);
}

template <ReduceOp Op, typename Acc>
inline Acc combine(Acc a, Acc b) {
  if constexpr (Op == ReduceOp::kSum || Op == ReduceOp::kAvg) return a + b;
  if constexpr (Op == ReduceOp::kProd) return a * b;
  if constexpr (Op == ReduceOp::kMax) return std::max(a, b);
  if constexpr (Op == ReduceOp::kMin) return std::min(a, b);
}

// Signed max/min must compare as signed even though the accumulator is unsigned.
template <ReduceOp Op, typename T, typename Acc>
inline Acc combineTyped(Acc a, Acc b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T> &&
                (Op == ReduceOp::kMax || Op == ReduceOp::kMin)) {
    const T x = static_cast<T>(a), y = static_cast<T>(b);
    return static_cast<Acc>(Op == ReduceOp::kMax ? std::max(x, y) : std::min(x, y));
  } else {
    return combine<Op, Acc>(a, b);
  }
}

template <typename T, typename Acc>
inline Acc divideAcc(Acc v, int divisor) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<Acc>(static_cast<T>(v) / static_cast<T>(divisor));
  } else {
    return v / static_cast<Acc>(divisor);
  }
}

template <ReduceOp Op, typename T>
void reduceManyTyped(T* out, const void* const* srcs, int numSrcs, size_t count,
                     int avgDivisor) {
  using Acc = typename AccType<T>::type;
  Acc acc[kBlockElems];
  for (size_t base = 0; base < count; base += kBlockElems) {
    const size_t n = std::min(kBlockElems, count - base);
    {  // restrict only while reading: `out` may alias any source (in-place reductions)
      const T* __restrict s0 = static_cast<const T*>(srcs[0]) + base;
      for (size_t i = 0; i < n; ++i) acc[i] = toAcc<Acc>(s0[i]);
    }
    for (int k = 1; k < numSrcs; ++k) {
      const T* __restrict sk = static_cast<const T*>(srcs[k]) + base;
      for (size_t i = 0; i < n; ++i) acc[i] = combineTyped<Op, T, Acc>(acc[i], toAcc<Acc>(sk[i]));
    }
    if constexpr (Op == ReduceOp::kAvg) {
      for (size_t i = 0; i < n; ++i) out[base + i] = fromAcc<T, Acc>(divideAcc<T, Acc>(acc[i], avgDivisor));
    } else {
      for (size_t i = 0; i < n; ++i) out[base + i] = fromAcc<T, Acc>(acc[i]);
    }
  }
}

// Two floating-point sources, summed or averaged: the hot case (2 ranks per host). One
// pass, out[i] = (a[i] + b[i]) [/ divisor]: the same IEEE operations in the same order as
// reduceManyTyped, so the result is bitwise the same, without the accumulator round trip.
template <typename T>
void combineTwoPlain(T* out, const T* a, const T* b, size_t count, bool divide, T divisor) {
  if (divide) {
    for (size_t i = 0; i < count; ++i) out[i] = (a[i] + b[i]) / divisor;
  } else {
    for (size_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
  }
}

// An output this large is not read again while it is still cached (a reduce-scatter's shard
// is read by the optimizer after the whole backward pass), so it is written around the cache
// with non-temporal stores: the destination lines are not read first (a quarter less memory
// traffic for a + b -> out) and the output does not evict the compute thread's working set.
// Measured on this project's 2-core VM (64 MiB, float32 average, bench/run_step_ops.sh):
// 7.4 ms with ordinary stores, 3.7 ms streamed. Below it, the consumer may still find the
// output in cache (shm_direct pushes each block to the peers right after reducing it).
constexpr size_t kStreamingMinBytes = size_t{4} << 20;

#if defined(__x86_64__)
constexpr size_t kVectorBytes = 32;

template <typename T>
__attribute__((target("avx"))) void combineTwoStreamed(T* out, const T* a, const T* b, size_t count, bool divide,
                                                       T divisor) {
  constexpr size_t lanes = kVectorBytes / sizeof(T);
  const size_t head = std::min(
      count, ((kVectorBytes - reinterpret_cast<uintptr_t>(out) % kVectorBytes) % kVectorBytes) / sizeof(T));
  combineTwoPlain(out, a, b, head, divide, divisor);
  size_t i = head;
  for (; i + lanes <= count; i += lanes) {
    if constexpr (std::is_same_v<T, float>) {
      __m256 s = _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
      if (divide) s = _mm256_div_ps(s, _mm256_set1_ps(divisor));
      _mm256_stream_ps(out + i, s);
    } else {
      __m256d s = _mm256_add_pd(_mm256_loadu_pd(a + i), _mm256_loadu_pd(b + i));
      if (divide) s = _mm256_div_pd(s, _mm256_set1_pd(divisor));
      _mm256_stream_pd(out + i, s);
    }
  }
  combineTwoPlain(out + i, a + i, b + i, count - i, divide, divisor);
  // Non-temporal stores are weakly ordered: they must be visible before the release store
  // that tells the peers this shard is written.
  _mm_sfence();
}

bool cpuStreams() {
  static const bool avx = __builtin_cpu_supports("avx");
  return avx;
}
#endif

template <typename T>
void combineTwo(T* out, const T* a, const T* b, size_t count, bool divide, int divisor) {
  const T d = static_cast<T>(divisor);
#if defined(__x86_64__)
  // In place (out is a source) the lines are read anyway; streaming would only evict them.
  const bool aliased = out == a || out == b;
  if (!aliased && count * sizeof(T) >= kStreamingMinBytes && cpuStreams()) {
    return combineTwoStreamed(out, a, b, count, divide, d);
  }
#endif
  combineTwoPlain(out, a, b, count, divide, d);
}

template <typename T>
void reduceManyOp(ReduceOp op, T* out, const void* const* srcs, int numSrcs, size_t count,
                  int avgDivisor) {
  switch (op) {
    case ReduceOp::kSum: return reduceManyTyped<ReduceOp::kSum, T>(out, srcs, numSrcs, count, avgDivisor);
    case ReduceOp::kAvg: return reduceManyTyped<ReduceOp::kAvg, T>(out, srcs, numSrcs, count, avgDivisor);
    case ReduceOp::kMax: return reduceManyTyped<ReduceOp::kMax, T>(out, srcs, numSrcs, count, avgDivisor);
    case ReduceOp::kMin: return reduceManyTyped<ReduceOp::kMin, T>(out, srcs, numSrcs, count, avgDivisor);
    case ReduceOp::kProd: return reduceManyTyped<ReduceOp::kProd, T>(out, srcs, numSrcs, count, avgDivisor);
  }
}

template <typename T>
void finishAvgTyped(T* data, size_t count, int divisor) {
  using Acc = typename AccType<T>::type;
  for (size_t i = 0; i < count; ++i) {
    if constexpr (std::is_integral_v<T>) {
      data[i] = static_cast<T>(data[i] / static_cast<T>(divisor));
    } else {
      data[i] = fromAcc<T, Acc>(toAcc<Acc>(data[i]) / static_cast<Acc>(divisor));
    }
  }
}

}  // namespace

void reduceMany(ReduceOp op, DType dtype, void* out, const void* const* srcs, int numSrcs,
                size_t count, int avgDivisor) {
  if (count == 0) return;
  if (numSrcs == 1) {
    if (out != srcs[0]) std::memmove(out, srcs[0], count * dtypeBytes(dtype));
    if (op == ReduceOp::kAvg) finishAvg(dtype, out, count, avgDivisor);
    return;
  }
  const bool sumOrAvg = op == ReduceOp::kSum || op == ReduceOp::kAvg;
  if (numSrcs == 2 && sumOrAvg && dtype == DType::kFloat32) {
    return combineTwo(static_cast<float*>(out), static_cast<const float*>(srcs[0]),
                      static_cast<const float*>(srcs[1]), count, op == ReduceOp::kAvg, avgDivisor);
  }
  if (numSrcs == 2 && sumOrAvg && dtype == DType::kFloat64) {
    return combineTwo(static_cast<double*>(out), static_cast<const double*>(srcs[0]),
                      static_cast<const double*>(srcs[1]), count, op == ReduceOp::kAvg, avgDivisor);
  }
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    reduceManyOp<T>(op, static_cast<T*>(out), srcs, numSrcs, count, avgDivisor);
  });
}

void reduceInto(ReduceOp op, DType dtype, void* inout, const void* in, size_t count) {
  const void* srcs[2] = {inout, in};
  // kAvg accumulates plain sums here; the caller divides once at the end.
  reduceMany(op == ReduceOp::kAvg ? ReduceOp::kSum : op, dtype, inout, srcs, 2, count, 1);
}

void finishAvg(DType dtype, void* data, size_t count, int divisor) {
  if (divisor == 1 || count == 0) return;
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    finishAvgTyped<T>(static_cast<T*>(data), count, divisor);
  });
}

}  // namespace strata::collectives
