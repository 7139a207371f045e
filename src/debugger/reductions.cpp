#include "debugger/reductions.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/errors.h"

namespace strata::debugger {
namespace {

constexpr ReductionOp kAllOps[] = {ReductionOp::kMin,  ReductionOp::kMax,      ReductionOp::kMean,
                                   ReductionOp::kStd,  ReductionOp::kVariance, ReductionOp::kSum,
                                   ReductionOp::kProd, ReductionOp::kL1,       ReductionOp::kL2};

// Sums for one sign convention (plain or |x|), gathered in one pass.
struct Moments {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double sum = 0;
  double prod = 1;
  double sumAbs = 0;
  double sumSq = 0;
  double sqDev = 0;  // second pass: sum of (x - mean)^2
  bool sawNan = false;
};

// `at(i)` returns element i as a double; templated so the per-element access inlines.
template <typename At>
Moments momentsOf(size_t n, const At& at, bool abs) {
  Moments m;
  for (size_t i = 0; i < n; ++i) {
    const double raw = at(i);
    const double x = abs ? std::fabs(raw) : raw;
    if (std::isnan(x)) m.sawNan = true;
    if (x < m.min) m.min = x;
    if (x > m.max) m.max = x;
    m.sum += x;
    m.prod *= x;
    m.sumAbs += std::fabs(x);
    m.sumSq += x * x;
  }
  const double mean = m.sum / static_cast<double>(n);
  for (size_t i = 0; i < n; ++i) {
    const double raw = at(i);
    const double d = (abs ? std::fabs(raw) : raw) - mean;
    m.sqDev += d * d;
  }
  return m;
}

double pick(const Moments& m, ReductionOp op, size_t n) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double count = static_cast<double>(n);
  switch (op) {
    case ReductionOp::kMin: return m.sawNan ? nan : m.min;  // numpy propagates NaN
    case ReductionOp::kMax: return m.sawNan ? nan : m.max;
    case ReductionOp::kMean: return m.sum / count;
    case ReductionOp::kStd: return std::sqrt(m.sqDev / count);
    case ReductionOp::kVariance: return m.sqDev / count;
    case ReductionOp::kSum: return m.sum;
    case ReductionOp::kProd: return m.prod;
    case ReductionOp::kL1: return m.sumAbs;
    case ReductionOp::kL2: return std::sqrt(m.sumSq);
  }
  return nan;
}

}  // namespace

const char* reductionOpName(ReductionOp op) {
  switch (op) {
    case ReductionOp::kMin: return "min";
    case ReductionOp::kMax: return "max";
    case ReductionOp::kMean: return "mean";
    case ReductionOp::kStd: return "std";
    case ReductionOp::kVariance: return "variance";
    case ReductionOp::kSum: return "sum";
    case ReductionOp::kProd: return "prod";
    case ReductionOp::kL1: return "l1";
    case ReductionOp::kL2: return "l2";
  }
  return "?";
}

std::optional<ReductionOp> parseReductionOp(const std::string& name) {
  std::string base = name;
  if (base == "l1_norm" || base == "l2_norm") base = base.substr(0, 2);
  for (ReductionOp op : kAllOps)
    if (base == reductionOpName(op)) return op;
  return std::nullopt;
}

std::optional<Reduction> parseReduction(const std::string& configName) {
  Reduction r;
  std::string rest = configName;
  if (rest.rfind("abs_", 0) == 0) {
    r.abs = true;
    rest = rest.substr(4);
  }
  const auto op = parseReductionOp(rest);
  if (!op) return std::nullopt;
  r.op = *op;
  return r;
}

std::string reductionConfigName(const Reduction& r) {
  std::string name = r.abs ? "abs_" : "";
  name += reductionOpName(r.op);
  if (r.op == ReductionOp::kL1 || r.op == ReductionOp::kL2) name += "_norm";
  return name;
}

namespace {

template <typename At>
std::vector<double> reduceWith(size_t n, const At& at, const std::vector<Reduction>& requests) {
  std::vector<double> out;
  if (n == 0) return out;
  std::optional<Moments> plain, absolute;
  for (const Reduction& r : requests) {
    auto& slot = r.abs ? absolute : plain;
    if (!slot) slot = momentsOf(n, at, r.abs);
    out.push_back(pick(*slot, r.op, n));
  }
  return out;
}

}  // namespace

std::optional<double> reduce(const std::vector<double>& values, const Reduction& r) {
  const auto out = reduceAll(values, {r});
  if (out.empty()) return std::nullopt;
  return out[0];
}

std::vector<double> reduceAll(const std::vector<double>& values,
                              const std::vector<Reduction>& requests) {
  return reduceWith(values.size(), [&](size_t i) { return values[i]; }, requests);
}

std::vector<double> reduceAll(const TensorData& tensor, const std::vector<Reduction>& requests) {
  STRATA_CHECK(tensor.bytes.size() == tensor.numel() * dtypeBytes(tensor.dtype),
               "tensor bytes do not match its shape");
  return reduceAll(tensor.dtype, tensor.bytes.data(), tensor.numel(), requests);
}

std::vector<double> reduceAll(DType dtype, const void* data, size_t numel,
                              const std::vector<Reduction>& requests) {
  STRATA_CHECK(dtype != DType::kString, "string tensors have no reductions");
  const size_t width = dtypeBytes(dtype);
  const char* base = static_cast<const char*>(data);
  switch (dtype) {  // the common types get a direct load; the rest go through the generic path
    case DType::kFloat32:
      return reduceWith(numel, [&](size_t i) {
        float v;
        std::memcpy(&v, base + 4 * i, 4);
        return static_cast<double>(v);
      }, requests);
    case DType::kFloat64:
      return reduceWith(numel, [&](size_t i) {
        double v;
        std::memcpy(&v, base + 8 * i, 8);
        return v;
      }, requests);
    default:
      return reduceWith(
          numel, [&](size_t i) { return elementAsDouble(dtype, base + i * width); }, requests);
  }
}

}  // namespace strata::debugger
