#include "rules/stats.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace strata::rules::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// numpy's PW_BLOCKSIZE (numpy/core/src/umath/loops_utils.h.src).
constexpr size_t kPairwiseBlock = 128;

// numpy's pairwise_sum for doubles; `stride` lets pstd sum squared deviations in place.
double pairwise(const double* a, size_t n) {
  if (n < 8) {
    double res = 0.;
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= kPairwiseBlock) {
    double r[8];
    for (int k = 0; k < 8; ++k) r[k] = a[k];
    size_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int k = 0; k < 8; ++k) r[k] += a[i + k];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise(a, n2) + pairwise(a + n2, n - n2);
}

// numpy's _lerp: a + (b-a)*t, computed from b when t >= 0.5 (numpy >= 1.22).
double lerp(double a, double b, double t) {
  const double diff = b - a;
  return t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
}

}  // namespace

double sum(const double* v, size_t n) { return pairwise(v, n); }

double mean(const double* v, size_t n) {
  if (n == 0) return kNaN;
  return pairwise(v, n) / static_cast<double>(n);
}

double pvar(const double* v, size_t n) {
  if (n == 0) return kNaN;
  const double m = mean(v, n);
  std::vector<double> sq(n);
  for (size_t i = 0; i < n; ++i) {
    const double d = v[i] - m;
    sq[i] = d * d;
  }
  return pairwise(sq.data(), n) / static_cast<double>(n);
}

double pstd(const double* v, size_t n) { return std::sqrt(pvar(v, n)); }

double quantileSorted(const std::vector<double>& sorted, double q) {
  const size_t n = sorted.size();
  if (n == 0) return kNaN;
  const double virtualIndex = q * static_cast<double>(n - 1);
  double previous = std::floor(virtualIndex);
  if (previous < 0) previous = 0;
  const size_t lo = std::min(static_cast<size_t>(previous), n - 1);
  const size_t hi = std::min(lo + 1, n - 1);
  const double gamma = virtualIndex - previous;
  return lerp(sorted[lo], sorted[hi], gamma);
}

double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return quantileSorted(values, q);
}

double median(std::vector<double> values) {
  const size_t n = values.size();
  if (n == 0) return kNaN;
  std::sort(values.begin(), values.end());
  if (n % 2 == 1) return values[n / 2];
  return (values[n / 2 - 1] + values[n / 2]) / 2.0;
}

BoxStats boxStats(const std::vector<double>& sorted) {
  BoxStats b;
  if (sorted.empty()) return b;
  b.min = sorted.front();
  b.max = sorted.back();
  b.p05 = quantileSorted(sorted, 0.05);
  b.p25 = quantileSorted(sorted, 0.25);
  b.p50 = quantileSorted(sorted, 0.50);
  b.p75 = quantileSorted(sorted, 0.75);
  b.p95 = quantileSorted(sorted, 0.95);
  b.p99 = quantileSorted(sorted, 0.99);
  const double iqr = b.p75 - b.p25;
  b.upper = std::min(b.p75 + 1.5 * iqr, quantileSorted(sorted, 1.0));
  b.lower = std::max(b.p25 - 1.5 * iqr, quantileSorted(sorted, 0.0));
  return b;
}

int histogramBin(double x, const std::vector<double>& edges) {
  if (edges.size() < 2 || !(x >= edges.front()) || !(x <= edges.back())) return -1;
  const int nbins = static_cast<int>(edges.size()) - 1;
  // searchsorted(edges, x, 'right') - 1, with the last edge closed.
  auto it = std::upper_bound(edges.begin(), edges.end(), x);
  int bin = static_cast<int>(it - edges.begin()) - 1;
  if (bin >= nbins) bin = nbins - 1;
  return bin;
}

std::vector<int64_t> histogram(const std::vector<double>& values, const std::vector<double>& edges) {
  std::vector<int64_t> counts(edges.size() > 1 ? edges.size() - 1 : 0, 0);
  for (double x : values) {
    const int bin = histogramBin(x, edges);
    if (bin >= 0) ++counts[static_cast<size_t>(bin)];
  }
  return counts;
}

void histogramAuto(const std::vector<double>& values, int bins, std::vector<int64_t>* counts,
                   std::vector<double>* edges) {
  double first = 0, last = 1;
  if (!values.empty()) {
    first = *std::min_element(values.begin(), values.end());
    last = *std::max_element(values.begin(), values.end());
  }
  if (first == last) {
    first -= 0.5;
    last += 0.5;
  }
  edges->assign(static_cast<size_t>(bins) + 1, 0.0);
  const double step = (last - first) / bins;  // np.linspace
  for (int i = 0; i <= bins; ++i) (*edges)[static_cast<size_t>(i)] = i * step + first;
  edges->back() = last;
  counts->assign(static_cast<size_t>(bins), 0);
  // numpy's equal-width fast path: index by arithmetic, then fix up against the edges.
  const double norm = bins / (last - first);
  for (double x : values) {
    if (!(x >= first && x <= last)) continue;
    int64_t i = static_cast<int64_t>((x - first) * norm);
    if (i >= bins) i = bins - 1;
    if (x < (*edges)[static_cast<size_t>(i)]) --i;
    else if (i + 1 < bins && x >= (*edges)[static_cast<size_t>(i) + 1]) ++i;
    ++(*counts)[static_cast<size_t>(i)];
  }
}

std::vector<double> arange(double start, double stop, double step) {
  std::vector<double> out;
  const auto n = static_cast<int64_t>(std::ceil((stop - start) / step));
  for (int64_t i = 0; i < n; ++i) out.push_back(start + static_cast<double>(i) * step);
  return out;
}

double entropy(const std::vector<double>& p, const std::vector<double>& q) {
  const double sp = sum(p), sq = sum(q);
  std::vector<double> terms(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    const double pi = p[i] / sp, qi = q[i] / sq;
    if (std::isnan(pi) || std::isnan(qi)) {
      terms[i] = kNaN;
    } else if (pi > 0 && qi > 0) {
      terms[i] = pi * std::log(pi / qi);
    } else if (pi == 0 && qi >= 0) {
      terms[i] = 0;
    } else {
      terms[i] = std::numeric_limits<double>::infinity();
    }
  }
  return sum(terms);
}

double jensenShannonDistance(const std::vector<int64_t>& h1, const std::vector<int64_t>& h2) {
  std::vector<double> a(h1.begin(), h1.end()), b(h2.begin(), h2.end()), m(h1.size());
  for (size_t i = 0; i < m.size(); ++i) m[i] = (a[i] + b[i]) / 2;
  return std::sqrt((entropy(a, m) + entropy(b, m)) / 2);
}

std::string pyFloat(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-1.2345e-07"
  const size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  const int exp10 = std::atoi(sci.c_str() + epos + 1);
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out;
  if (exp10 >= -4 && exp10 < 16) {
    if (exp10 >= 0) {
      std::string intPart = digits.substr(0, std::min<size_t>(digits.size(), exp10 + 1));
      while (intPart.size() < static_cast<size_t>(exp10) + 1) intPart += '0';
      std::string frac = digits.size() > static_cast<size_t>(exp10) + 1 ? digits.substr(exp10 + 1) : "0";
      out = intPart + "." + frac;
    } else {
      out = "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += e;
  }
  return neg ? "-" + out : out;
}

void RollingWindow::push(double x) {
  buf_[next_] = x;
  next_ = (next_ + 1) % buf_.size();
  ++count_;
}

std::vector<double> RollingWindow::values() const {
  const size_t n = size();
  std::vector<double> out(n);
  const size_t start = (next_ + buf_.size() - n) % buf_.size();
  for (size_t i = 0; i < n; ++i) out[i] = buf_[(start + i) % buf_.size()];
  return out;
}

double RollingWindow::fromBack(size_t back) const {
  return buf_[(next_ + buf_.size() - 1 - back) % buf_.size()];
}

void BoundedSeries::push(double x) {
  if (count_ == 0) {
    min_ = max_ = x;
  } else {
    min_ = std::min(min_, x);
    max_ = std::max(max_, x);
  }
  ++count_;
  sum_ += x;
  if (++sinceKept_ < stride_) return;
  sinceKept_ = 0;
  kept_.push_back(x);
  if (kept_.size() >= capacity_) {
    // Keep every second value and halve the sampling rate from now on.
    size_t j = 0;
    for (size_t i = 1; i < kept_.size(); i += 2) kept_[j++] = kept_[i];
    kept_.resize(j);
    stride_ *= 2;
  }
}

std::vector<double> BoundedSeries::sorted() const {
  std::vector<double> out = kept_;
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace strata::rules::stats
