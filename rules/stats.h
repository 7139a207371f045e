// Statistics with numpy's conventions, so rule numbers match the reference implementation
// (specs/smdebug.md §3.0): np.quantile with the default 'linear' method, np.median, np.mean with
// pairwise summation, np.std with ddof=0 (population), np.histogram, and scipy.stats.entropy
// for the Jensen-Shannon distance. Plus two bounded containers the rules keep per series.
// Everything here is pure and single-threaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::rules::stats {

// np.sum of float64 (pairwise summation, 8-way unrolled blocks of 128, as numpy does).
double sum(const double* v, size_t n);
inline double sum(const std::vector<double>& v) { return sum(v.data(), v.size()); }
// np.mean; NaN when empty.
double mean(const double* v, size_t n);
inline double mean(const std::vector<double>& v) { return mean(v.data(), v.size()); }
// np.std(v) (ddof=0, population); NaN when empty.
double pstd(const double* v, size_t n);
inline double pstd(const std::vector<double>& v) { return pstd(v.data(), v.size()); }
// np.var(v) (ddof=0).
double pvar(const double* v, size_t n);

// np.quantile(v, q) ('linear': virtual index q*(n-1), numpy's _lerp). `sorted` must be in
// ascending order. NaN when empty.
double quantileSorted(const std::vector<double>& sorted, double q);
// Copies and sorts; use quantileSorted for several quantiles of one series.
double quantile(std::vector<double> values, double q);
// np.median: the middle element, or the mean of the two middle ones.
double median(std::vector<double> values);

// Box-plot numbers as the reference records them: p25/p50/p75/p95 of the series, and whiskers
// upper = min(p75 + 1.5 IQR, max), lower = max(p25 - 1.5 IQR, min).
struct BoxStats {
  double min = 0, p05 = 0, p25 = 0, p50 = 0, p75 = 0, p95 = 0, p99 = 0, max = 0;
  double upper = 0, lower = 0;
};
BoxStats boxStats(const std::vector<double>& sorted);

// np.histogram(values, bins=edges): bin i holds edges[i] <= x < edges[i+1], the last bin also
// holds x == edges.back(); values outside [edges.front(), edges.back()] are dropped.
std::vector<int64_t> histogram(const std::vector<double>& values, const std::vector<double>& edges);
// Index of the bin for x with the same semantics, or -1 when dropped.
int histogramBin(double x, const std::vector<double>& edges);
// np.histogram(values, bins=n): edges = linspace(min, max, n+1) (min-0.5, max+0.5 when equal).
void histogramAuto(const std::vector<double>& values, int bins, std::vector<int64_t>* counts,
                   std::vector<double>* edges);
// np.arange(start, stop, step) for the reference's bin edges.
std::vector<double> arange(double start, double stop, double step);

// scipy.stats.entropy(p, q) (natural log; both normalised to sum 1). inf when q has a zero
// where p has mass; NaN when either sums to 0.
double entropy(const std::vector<double>& p, const std::vector<double>& q);
// The reference's Jensen-Shannon distance of two histograms of counts:
// m = (h1 + h2) / 2, sqrt((entropy(h1, m) + entropy(h2, m)) / 2).
double jensenShannonDistance(const std::vector<int64_t>& h1, const std::vector<int64_t>& h2);

// Python's repr(float): the shortest round-trip digits, "50.0", "0.2", "1e-07".
std::string pyFloat(double x);

// The last `capacity` values of a series (a ring buffer).
class RollingWindow {
 public:
  explicit RollingWindow(size_t capacity = 1) : buf_(capacity > 0 ? capacity : 1) {}
  void push(double x);
  size_t size() const { return count_ < buf_.size() ? count_ : buf_.size(); }
  size_t capacity() const { return buf_.size(); }
  // The kept values, oldest first.
  std::vector<double> values() const;
  // The value `back` places from the newest (0 = newest).
  double fromBack(size_t back) const;

 private:
  std::vector<double> buf_;
  size_t next_ = 0;
  size_t count_ = 0;
};

// A whole series kept in bounded memory: exact until `capacity` values, then a uniform
// subsample (every 2nd, 4th, ... value), so quantiles stay representative. The count, sum,
// min and max are always exact. The reference keeps every value (resetting at 1e6).
class BoundedSeries {
 public:
  // 262144 doubles = 2 MiB per series: exact for 36 h of 500 ms samples.
  static constexpr size_t kDefaultCapacity = size_t{1} << 18;

  explicit BoundedSeries(size_t capacity = kDefaultCapacity) : capacity_(capacity < 2 ? 2 : capacity) {}
  void push(double x);
  int64_t count() const { return count_; }
  bool empty() const { return count_ == 0; }
  bool exact() const { return stride_ == 1; }
  double min() const { return min_; }
  double max() const { return max_; }
  double sum() const { return sum_; }
  // The kept values in arrival order (all of them while exact()).
  const std::vector<double>& kept() const { return kept_; }
  std::vector<double> sorted() const;

 private:
  size_t capacity_;
  std::vector<double> kept_;
  int64_t count_ = 0;
  int64_t stride_ = 1;
  int64_t sinceKept_ = 0;
  double sum_ = 0, min_ = 0, max_ = 0;
};

}  // namespace strata::rules::stats
