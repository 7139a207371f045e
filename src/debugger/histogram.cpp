#include "debugger/histogram.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace strata::debugger {

const std::vector<double>& defaultHistogramEdges() {
  static const std::vector<double> kEdges = [] {
    std::vector<double> positive;
    for (double v = 1e-12; v < 1e20; v *= 1.1) positive.push_back(v);
    std::vector<double> edges;
    edges.reserve(2 * positive.size() + 1);
    for (auto it = positive.rbegin(); it != positive.rend(); ++it) edges.push_back(-*it);
    edges.push_back(0.0);
    edges.insert(edges.end(), positive.begin(), positive.end());
    return edges;
  }();
  return kEdges;
}

std::optional<Histogram> makeHistogram(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  const std::vector<double>& edges = defaultHistogramEdges();
  std::vector<double> counts(edges.size() - 1, 0.0);
  Histogram h;
  h.min = values[0];
  h.max = values[0];
  for (const double x : values) {
    if (!std::isfinite(x)) return std::nullopt;
    h.min = std::min(h.min, x);
    h.max = std::max(h.max, x);
    h.sum += x;
    h.sumSquares += x * x;
    if (x < edges.front() || x > edges.back()) continue;
    // The bucket whose left edge is the last one <= x; x equal to the last edge joins the
    // last bucket.
    size_t i = static_cast<size_t>(std::upper_bound(edges.begin(), edges.end(), x) - edges.begin()) - 1;
    if (i == counts.size()) --i;
    counts[i] += 1;
  }
  h.num = static_cast<double>(values.size());
  size_t first = counts.size(), last = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    first = std::min(first, i);
    last = i;
  }
  if (first == counts.size()) return std::nullopt;
  // Bucket k (k = 0 .. last - first + 1) ends at edges[first + k]; its count is that of
  // counts[first + k - 1], or 0 for the empty leading bucket left of edges[0].
  for (size_t k = 0; first + k <= last + 1; ++k) {
    h.bucketLimit.push_back(edges[first + k]);
    h.bucket.push_back(first + k >= 1 ? counts[first + k - 1] : 0.0);
  }
  return h;
}

std::string cleanTensorboardTag(const std::string& tag) {
  std::string out;
  out.reserve(tag.size());
  for (const char c : tag) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '/' || c == '.';
    out += keep ? c : '_';
  }
  const size_t start = out.find_first_not_of('/');
  return start == std::string::npos ? std::string() : out.substr(start);
}

}  // namespace strata::debugger
