// numpy / scipy conventions of rules/stats.h. Expected values are numpy's (worked by hand
// from its definitions: linear quantile, ddof=0, histogram bin edges).
#include <gtest/gtest.h>

#include <cmath>

#include "rules/params.h"
#include "rules/stats.h"

namespace strata::rules::stats {
namespace {

TEST(Stats, QuantileIsNumpyLinear) {
  // np.quantile([1, 2, 3, 4], q): virtual index q * 3.
  std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(quantile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile(v, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(quantile(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile(v, 0.25), 1.75);
  EXPECT_DOUBLE_EQ(quantile(v, 0.95), 3.85);
  EXPECT_DOUBLE_EQ(quantile({7}, 0.95), 7.0);
  EXPECT_TRUE(std::isnan(quantile({}, 0.5)));
  // Not nearest-rank, not lower/higher/midpoint.
  EXPECT_NE(quantile(v, 0.95), 4.0);
  // 0..100 step 1: p99 = 99, p95 = 95.
  std::vector<double> r;
  for (int i = 0; i <= 100; ++i) r.push_back(i);
  EXPECT_DOUBLE_EQ(quantile(r, 0.99), 99.0);
  EXPECT_DOUBLE_EQ(quantile(r, 0.05), 5.0);
}

TEST(Stats, MedianAveragesTheMiddlePair) {
  EXPECT_DOUBLE_EQ(median({1, 2, 3, 4}), 2.5);
  EXPECT_DOUBLE_EQ(median({5, 1, 3}), 3.0);
}

TEST(Stats, StdIsPopulation) {
  std::vector<double> v = {2, 4, 4, 4, 5, 5, 7, 9};  // population std 2, sample std 2.138
  EXPECT_DOUBLE_EQ(pstd(v), 2.0);
  EXPECT_DOUBLE_EQ(pvar(v.data(), v.size()), 4.0);
  EXPECT_DOUBLE_EQ(mean(v), 5.0);
  EXPECT_TRUE(std::isnan(pstd(std::vector<double>{})));
}

TEST(Stats, PairwiseSumMatchesNumpyOnLongInputs) {
  std::vector<double> v(1000, 0.1);
  // numpy: np.sum(np.full(1000, 0.1)) == 100.00000000000001 (pairwise), a plain loop gives
  // 99.9999999999986.
  EXPECT_EQ(sum(v), 100.00000000000001);
  EXPECT_NE(sum(v), 99.9999999999986);
}

TEST(Stats, HistogramMatchesNumpyEdges) {
  const std::vector<double> edges = arange(0, 100, 2);  // the reference's LoadBalancing bins
  ASSERT_EQ(edges.size(), 50u);                         // 49 bins, last edge 98
  EXPECT_DOUBLE_EQ(edges.back(), 98.0);
  const auto h = histogram({0, 1.99, 2, 97.9, 98, 98.5, 100, -1}, edges);
  ASSERT_EQ(h.size(), 49u);
  EXPECT_EQ(h[0], 2);   // 0, 1.99
  EXPECT_EQ(h[1], 1);   // 2
  EXPECT_EQ(h[48], 2);  // 97.9 and 98 (the last bin is closed)
  int64_t total = 0;
  for (auto c : h) total += c;
  EXPECT_EQ(total, 5);  // 98.5, 100 and -1 are dropped
}

TEST(Stats, HistogramAutoBins) {
  std::vector<int64_t> counts;
  std::vector<double> edges;
  histogramAuto({1, 2, 3, 4}, 3, &counts, &edges);  // np.histogram(.., bins=3): edges 1, 2, 3, 4
  ASSERT_EQ(edges.size(), 4u);
  EXPECT_DOUBLE_EQ(edges[1], 2.0);
  EXPECT_EQ(counts, (std::vector<int64_t>{1, 1, 2}));
  histogramAuto({5, 5}, 2, &counts, &edges);  // equal values: range (4.5, 5.5)
  EXPECT_DOUBLE_EQ(edges.front(), 4.5);
  EXPECT_EQ(counts, (std::vector<int64_t>{0, 2}));
}

TEST(Stats, JensenShannonLikeScipy) {
  // Disjoint histograms: sqrt(ln 2); identical shapes: 0.
  EXPECT_NEAR(jensenShannonDistance({10, 0}, {0, 10}), std::sqrt(std::log(2.0)), 1e-12);
  // The reference averages raw counts before normalising: with totals 10 and 5, m = (2/3, 1/3),
  // so the distance is sqrt((ln 1.5 + ln 3) / 2), not sqrt(ln 2).
  EXPECT_NEAR(jensenShannonDistance({10, 0}, {0, 5}), std::sqrt(std::log(4.5) / 2), 1e-12);
  EXPECT_NEAR(jensenShannonDistance({3, 1}, {6, 2}), 0.0, 1e-7);
  EXPECT_GT(jensenShannonDistance({3, 1}, {1, 3}), 0.2);
  EXPECT_TRUE(std::isnan(jensenShannonDistance({0, 0}, {0, 0})));
}

TEST(Stats, BoxStatsWhiskersClampToData) {
  std::vector<double> v;
  for (int i = 10; i < 30; ++i) v.push_back(i);
  const BoxStats b = boxStats(v);
  EXPECT_DOUBLE_EQ(b.p25, 14.75);
  EXPECT_DOUBLE_EQ(b.p75, 24.25);
  EXPECT_DOUBLE_EQ(b.upper, 29.0);  // p75 + 1.5 IQR = 38.5 > max
  EXPECT_DOUBLE_EQ(b.lower, 10.0);
}

TEST(Stats, BoundedSeriesIsExactThenSubsamples) {
  BoundedSeries s(8);
  for (int i = 0; i < 7; ++i) s.push(i);
  EXPECT_TRUE(s.exact());
  EXPECT_EQ(s.kept().size(), 7u);
  for (int i = 7; i < 100; ++i) s.push(i);
  EXPECT_FALSE(s.exact());
  EXPECT_LT(s.kept().size(), 8u);
  EXPECT_EQ(s.count(), 100);
  EXPECT_DOUBLE_EQ(s.max(), 99);
  EXPECT_DOUBLE_EQ(s.min(), 0);
  // A uniform subsample: its median stays near the true one.
  EXPECT_NEAR(quantile(s.kept(), 0.5), 49.5, 12);
}

TEST(Stats, RollingWindowKeepsTheNewest) {
  RollingWindow w(3);
  for (int i = 1; i <= 5; ++i) w.push(i);
  EXPECT_EQ(w.values(), (std::vector<double>{3, 4, 5}));
  EXPECT_DOUBLE_EQ(w.fromBack(0), 5);
  EXPECT_DOUBLE_EQ(w.fromBack(2), 3);
}

TEST(Stats, PythonReprOfFloats) {
  EXPECT_EQ(pyFloat(50.0), "50.0");
  EXPECT_EQ(pyFloat(0.2), "0.2");
  EXPECT_EQ(pyFloat(1e-7), "1e-07");
  EXPECT_EQ(pyFloat(0.0001), "0.0001");
  EXPECT_EQ(pyFloat(1e16), "1e+16");
  EXPECT_EQ(pyFloat(16.99999), "16.99999");
  EXPECT_EQ(pyFloat(-9.4999), "-9.4999");
  EXPECT_EQ(pyFloat(0.022222222222222143), "0.022222222222222143");
}

TEST(Params, ReprKeepsIntsAndFloatsApart) {
  Params p("X", {{"threshold", 20}, {"ratio", "0.5"}, {"flag", "True"}});
  EXPECT_EQ(p.number("threshold", 50), 20);
  EXPECT_EQ(p.number("ratio", 0.2), 0.5);
  EXPECT_TRUE(p.boolean("flag", false));
  EXPECT_EQ(p.number("absent", 0.2), 0.2);
  EXPECT_EQ(p.joined({"threshold", "ratio", "flag", "absent"}), "threshold:20\nratio:0.5\nflag:True\nabsent:0.2");
  EXPECT_NO_THROW(p.checkAllUsed());
  Params q("X", {{"treshold", 1}});
  q.number("threshold", 1);
  EXPECT_THROW(q.checkAllUsed(), std::invalid_argument);
  Params bad("X", {{"threshold", "high"}});
  EXPECT_THROW(bad.number("threshold", 1), std::invalid_argument);
}

}  // namespace
}  // namespace strata::rules::stats
