// TensorBoard histograms of saved tensors (smdebug's save_histogram; TensorBoard's
// HistogramProto). Pure functions, thread-safe.
//
// Buckets follow what smdebug writes: TensorFlow's default bucket edges (±1e-12·1.1^k up to
// 1e20, and 0), each value counted in the bucket [edge_i, edge_i+1) (the last edge
// inclusive, values beyond the outermost edges dropped, as numpy.histogram does), then only
// the range from one bucket left of the first non-empty one to the last non-empty one is
// kept. TensorBoard stores right edges only: bucket_limit[k] is the right edge of the
// bucket whose count is bucket[k]; the leading bucket (count 0 unless it is the very first)
// carries the left edge of the first non-empty bucket.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace strata::debugger {

struct Histogram {
  double min = 0;
  double max = 0;
  double num = 0;
  double sum = 0;
  double sumSquares = 0;
  std::vector<double> bucketLimit;  // right edges, increasing
  std::vector<double> bucket;       // counts, one per limit
};

// TensorFlow's default edges, built by repeated multiplication as smdebug builds them (so the
// doubles are bit-identical): -1e20.. -1e-12, 0, 1e-12 .. <1e20.
const std::vector<double>& defaultHistogramEdges();

// The histogram of `values`; nullopt when there is nothing to draw: no values, a non-finite
// value (TensorFlow's histogram op refuses those), or none inside the edges.
std::optional<Histogram> makeHistogram(const std::vector<double>& values);

// A TensorBoard tag as smdebug cleans it: characters other than letters, digits, '_', '-',
// '/' and '.' become '_', and leading '/' are dropped.
std::string cleanTensorboardTag(const std::string& tag);

}  // namespace strata::debugger
