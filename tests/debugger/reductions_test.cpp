// Reductions against a reference computed here, with the documented conventions:
// flattened norms, population variance (ddof 0), abs_ applied element-wise first.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "debugger/reductions.h"

namespace strata::debugger {
namespace {

// The naive definitions, in long double.
long double reference(const std::vector<double>& xs, ReductionOp op, bool abs) {
  std::vector<long double> v;
  for (double x : xs) v.push_back(abs ? std::fabs(x) : x);
  long double sum = 0, prod = 1, mn = v[0], mx = v[0], l1 = 0, l2 = 0;
  for (long double x : v) {
    sum += x;
    prod *= x;
    mn = std::min(mn, x);
    mx = std::max(mx, x);
    l1 += std::fabs(x);
    l2 += x * x;
  }
  const long double mean = sum / v.size();
  long double var = 0;
  for (long double x : v) var += (x - mean) * (x - mean);
  var /= v.size();  // ddof = 0
  switch (op) {
    case ReductionOp::kMin: return mn;
    case ReductionOp::kMax: return mx;
    case ReductionOp::kMean: return mean;
    case ReductionOp::kStd: return std::sqrt(var);
    case ReductionOp::kVariance: return var;
    case ReductionOp::kSum: return sum;
    case ReductionOp::kProd: return prod;
    case ReductionOp::kL1: return l1;
    case ReductionOp::kL2: return std::sqrt(l2);
  }
  return 0;
}

const ReductionOp kOps[] = {ReductionOp::kMin, ReductionOp::kMax,      ReductionOp::kMean,
                            ReductionOp::kStd, ReductionOp::kVariance, ReductionOp::kSum,
                            ReductionOp::kProd, ReductionOp::kL1,      ReductionOp::kL2};

TEST(Reductions, MatchReferenceForEveryOpAndAbs) {
  const std::vector<double> xs = {1.5, -2.0, 0.25, 3.0, -0.5, 2.0};  // a 2x3 tensor, flattened
  for (ReductionOp op : kOps) {
    for (bool abs : {false, true}) {
      const auto got = reduce(xs, {op, abs});
      ASSERT_TRUE(got.has_value());
      EXPECT_NEAR(*got, static_cast<double>(reference(xs, op, abs)), 1e-12)
          << (abs ? "abs_" : "") << reductionOpName(op);
    }
  }
}

TEST(Reductions, ConventionsAreExplicit) {
  const std::vector<double> xs = {3, -4};
  EXPECT_DOUBLE_EQ(*reduce(xs, {ReductionOp::kL2, false}), 5.0);
  EXPECT_DOUBLE_EQ(*reduce(xs, {ReductionOp::kL1, false}), 7.0);
  EXPECT_DOUBLE_EQ(*reduce(xs, {ReductionOp::kVariance, false}), 12.25);  // ddof 0, not 24.5
  EXPECT_DOUBLE_EQ(*reduce(xs, {ReductionOp::kMean, true}), 3.5);
  EXPECT_DOUBLE_EQ(*reduce(xs, {ReductionOp::kMin, true}), 3.0);
  EXPECT_DOUBLE_EQ(*reduce({7.0}, {ReductionOp::kStd, false}), 0.0);  // not NaN as with ddof 1
  // Flattened L1 of [[1, 2], [3, 4]] is 10; numpy's matrix 1-norm would be 6.
  EXPECT_DOUBLE_EQ(*reduce({1, 2, 3, 4}, {ReductionOp::kL1, false}), 10.0);
  EXPECT_FALSE(reduce({}, {ReductionOp::kMean, false}).has_value());
}

TEST(Reductions, TypedBuffersMatchDoubles) {
  const float f[4] = {1.0f, -2.5f, 4.0f, 0.5f};
  const int64_t i[4] = {1, -2, 4, 0};
  const uint8_t b[4] = {1, 0, 1, 1};
  std::vector<Reduction> all;
  for (ReductionOp op : kOps) all.push_back({op, false});
  const auto fv = reduceAll(DType::kFloat32, f, 4, all);
  const auto iv = reduceAll(DType::kInt64, i, 4, all);
  const auto bv = reduceAll(DType::kBool, b, 4, all);
  for (size_t k = 0; k < all.size(); ++k) {
    EXPECT_DOUBLE_EQ(fv[k], *reduce({1.0, -2.5, 4.0, 0.5}, all[k])) << reductionOpName(all[k].op);
    EXPECT_DOUBLE_EQ(iv[k], *reduce({1, -2, 4, 0}, all[k])) << reductionOpName(all[k].op);
    EXPECT_DOUBLE_EQ(bv[k], *reduce({1, 0, 1, 1}, all[k])) << reductionOpName(all[k].op);
  }
}

TEST(Reductions, NamesParseBothSpellings) {
  EXPECT_EQ(parseReduction("abs_l2_norm"), (Reduction{ReductionOp::kL2, true}));
  EXPECT_EQ(parseReduction("l1"), (Reduction{ReductionOp::kL1, false}));
  EXPECT_EQ(parseReduction("variance"), (Reduction{ReductionOp::kVariance, false}));
  EXPECT_FALSE(parseReduction("median").has_value());
  EXPECT_EQ(reductionConfigName({ReductionOp::kL1, true}), "abs_l1_norm");
  EXPECT_EQ(reductionConfigName({ReductionOp::kMean, false}), "mean");
}

}  // namespace
}  // namespace strata::debugger
