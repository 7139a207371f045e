#include <gtest/gtest.h>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "collectives/reduce_kernels.h"
#include "collectives/signature.h"

namespace strata::collectives {
namespace {

// The two-source sum/average (the 2-rank hot path) against the contract written out as a
// plain loop, bitwise: every length (below and above the size written with streaming stores),
// output misaligned by 0-3 elements, both float types, sum and average, in place or not.
template <typename T>
void checkTwoSources(size_t count, size_t outShift, ReduceOp op, int divisor, int inPlace) {
  std::mt19937 gen(static_cast<unsigned>(count * 7 + outShift));
  std::uniform_real_distribution<T> dist(-1000, 1000);
  std::vector<T> a(count), b(count), out(count + 4, T(-7)), expected(count);
  for (size_t i = 0; i < count; ++i) {
    a[i] = dist(gen);
    b[i] = i % 97 == 0 ? -a[i] : dist(gen);  // exact zeros (and their signs) too
  }
  for (size_t i = 0; i < count; ++i) {
    T acc = a[i];
    acc = acc + b[i];
    expected[i] = op == ReduceOp::kAvg ? acc / static_cast<T>(divisor) : acc;
  }
  T* dst = out.data() + outShift;
  std::vector<T> aIn = a, bIn = b;
  if (inPlace == 1) dst = aIn.data();
  if (inPlace == 2) dst = bIn.data();
  const void* srcs[] = {aIn.data(), bIn.data()};
  const DType dtype = sizeof(T) == 4 ? DType::kFloat32 : DType::kFloat64;
  reduceMany(op, dtype, dst, srcs, 2, count, divisor);
  ASSERT_EQ(std::memcmp(dst, expected.data(), count * sizeof(T)), 0)
      << "count " << count << " shift " << outShift << " in place " << inPlace;
  if (inPlace == 0) {  // nothing written around the output
    for (size_t i = 0; i < outShift; ++i) ASSERT_EQ(out[i], T(-7));
    for (size_t i = outShift + count; i < out.size(); ++i) ASSERT_EQ(out[i], T(-7));
  }
}

TEST(ReduceKernels, TwoSourcesSummedOrAveragedBitwiseAsTheContractAtEveryLengthAndAlignment) {
  const size_t streamed = (size_t{4} << 20) / sizeof(float) + 13;  // above the streaming size
  for (size_t count : {size_t{1}, size_t{7}, size_t{9}, size_t{1000}, streamed}) {
    for (size_t shift = 0; shift < 4; ++shift) {
      checkTwoSources<float>(count, shift, ReduceOp::kSum, 1, 0);
      checkTwoSources<float>(count, shift, ReduceOp::kAvg, 2, 0);
      checkTwoSources<float>(count, shift, ReduceOp::kAvg, 3, 0);
      checkTwoSources<double>(count, shift, ReduceOp::kAvg, 2, 0);
      checkTwoSources<double>(count, shift, ReduceOp::kSum, 1, 0);
    }
    checkTwoSources<float>(count, 0, ReduceOp::kAvg, 2, 1);
    checkTwoSources<float>(count, 0, ReduceOp::kAvg, 2, 2);
    checkTwoSources<double>(count, 0, ReduceOp::kSum, 1, 2);
  }
}

TEST(ReduceKernels, SumOfThreeFloatSources) {
  std::vector<float> a{1, 2, 3}, b{10, 20, 30}, c{100, 200, 300}, out(3);
  const void* srcs[] = {a.data(), b.data(), c.data()};
  reduceMany(ReduceOp::kSum, DType::kFloat32, out.data(), srcs, 3, 3, 3);
  EXPECT_EQ(out, (std::vector<float>{111, 222, 333}));
}

TEST(ReduceKernels, AvgDividesOnce) {
  std::vector<int32_t> a{7, -7}, b{0, 0}, out(2);
  const void* srcs[] = {a.data(), b.data()};
  reduceMany(ReduceOp::kAvg, DType::kInt32, out.data(), srcs, 2, 2, 2);
  EXPECT_EQ(out, (std::vector<int32_t>{3, -3}));  // integer division truncates, as NCCL
}

TEST(ReduceKernels, SignedMaxMinCompareAsSigned) {
  std::vector<int64_t> a{-5, 3}, b{2, -9}, out(2);
  const void* srcs[] = {a.data(), b.data()};
  reduceMany(ReduceOp::kMax, DType::kInt64, out.data(), srcs, 2, 2, 1);
  EXPECT_EQ(out, (std::vector<int64_t>{2, 3}));
  reduceMany(ReduceOp::kMin, DType::kInt64, out.data(), srcs, 2, 2, 1);
  EXPECT_EQ(out, (std::vector<int64_t>{-5, -9}));
}

TEST(ReduceKernels, IntegerSumsWrapInsteadOfOverflowing) {
  std::vector<int32_t> a{std::numeric_limits<int32_t>::max()}, b{1}, out(1);
  const void* srcs[] = {a.data(), b.data()};
  reduceMany(ReduceOp::kSum, DType::kInt32, out.data(), srcs, 2, 1, 1);
  EXPECT_EQ(out[0], std::numeric_limits<int32_t>::min());
}

TEST(ReduceKernels, HalfIsAccumulatedInFloatAndRoundedOnce) {
  // 2048 + 1 + 1 in half steps would give 2048 twice (1 is below half's spacing at 2048);
  // accumulated in float and rounded once it gives 2050.
  std::vector<c10::Half> a{c10::Half(2048.f)}, b{c10::Half(1.f)}, c{c10::Half(1.f)}, out(1);
  const void* srcs[] = {a.data(), b.data(), c.data()};
  reduceMany(ReduceOp::kSum, DType::kFloat16, out.data(), srcs, 3, 1, 1);
  EXPECT_EQ(static_cast<float>(out[0]), 2050.f);
}

TEST(ReduceKernels, BFloat16ProductAndLargeCounts) {
  const size_t count = 5000;  // spans several accumulator blocks
  std::vector<c10::BFloat16> a(count, c10::BFloat16(2.f)), b(count, c10::BFloat16(3.f)), out(count);
  const void* srcs[] = {a.data(), b.data()};
  reduceMany(ReduceOp::kProd, DType::kBFloat16, out.data(), srcs, 2, count, 1);
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(static_cast<float>(out[i]), 6.f) << i;
}

TEST(ReduceKernels, ReduceIntoAndFinishAvg) {
  std::vector<double> acc{1, 2}, in{3, 4};
  reduceInto(ReduceOp::kAvg, DType::kFloat64, acc.data(), in.data(), 2);
  EXPECT_EQ(acc, (std::vector<double>{4, 6}));  // avg accumulates sums
  finishAvg(DType::kFloat64, acc.data(), 2, 2);
  EXPECT_EQ(acc, (std::vector<double>{2, 3}));
  std::vector<uint8_t> u{200}, v{100};
  reduceInto(ReduceOp::kMax, DType::kUInt8, u.data(), v.data(), 1);
  EXPECT_EQ(u[0], 200);
}

TEST(Signature, DescribesAndTagsDiffer) {
  CollSignature a;
  a.seq = 41;
  a.kind = CollKind::kAllReduce;
  a.dtype = DType::kFloat32;
  a.op = ReduceOp::kSum;
  a.count = 1024;
  EXPECT_EQ(describe(a), "allreduce seq=41 float32 sum count=1024");
  CollSignature b = a;
  b.count = 1025;
  EXPECT_NE(signatureTag(a), signatureTag(b));
  EXPECT_TRUE(a != b);
  b = a;
  b.kind = CollKind::kBroadcast;
  b.root = 2;
  EXPECT_EQ(describe(b), "broadcast seq=41 float32 count=1024 root=2");
  EXPECT_NE(signatureTag(a), signatureTag(b));
}

}  // namespace
}  // namespace strata::collectives
