// Tensor reductions saved instead of (or besides) raw tensors (specs/smdebug.md §1.6).
//
// Conventions, fixed here because smdebug's own writer and reader disagree:
// - Norms are over the FLATTENED tensor: l1 = sum |x|, l2 = sqrt(sum x^2) (torch.norm's
//   p-norm over all elements, what smdebug's PyTorch hook stores). numpy's fallback in the
//   smdebug reader instead computes matrix norms for 2-D and fails for >= 3-D input.
// - variance and std are POPULATION statistics (ddof = 0), numpy's default and the smdebug
//   reader's fallback, so a stored reduction and one recomputed from the raw tensor agree.
//   torch.var's default (ddof = 1) would differ by n / (n - 1) and be NaN for one element.
// - abs_<op> applies |x| element-wise first, then the op.
// - Everything is accumulated in double; the stored value is a 0-d float64 tensor.
// - Empty tensors have no reductions (smdebug skips saving empty tensors too).
// Pure functions, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "debugger/types.h"

namespace strata::debugger {

enum class ReductionOp { kMin, kMax, kMean, kStd, kVariance, kSum, kProd, kL1, kL2 };

struct Reduction {
  ReductionOp op = ReductionOp::kMean;
  bool abs = false;
  bool operator==(const Reduction& o) const { return op == o.op && abs == o.abs; }
};

// smdebug's short op name: "min" ... "prod", "l1", "l2" (what Tensor.reduction_value takes
// and what appears in the reduction tensor name).
const char* reductionOpName(ReductionOp op);
// Parses "min".."prod", "l1", "l2", and the config's "l1_norm"/"l2_norm"; nullopt if unknown.
std::optional<ReductionOp> parseReductionOp(const std::string& name);
// Parses a config reduction: "mean", "abs_l2_norm", "l1", ...; nullopt if unknown.
std::optional<Reduction> parseReduction(const std::string& configName);
// The config / collections-JSON spelling: "mean", "abs_mean", "l2_norm", "abs_l1_norm".
std::string reductionConfigName(const Reduction& r);

// One reduction over `values` (already widened to double). nullopt for an empty input.
std::optional<double> reduce(const std::vector<double>& values, const Reduction& r);

// Several reductions in two passes over `values`; out[i] belongs to requests[i].
std::vector<double> reduceAll(const std::vector<double>& values,
                              const std::vector<Reduction>& requests);
// The same over a tensor's elements without widening it into a vector first.
std::vector<double> reduceAll(const TensorData& tensor, const std::vector<Reduction>& requests);
std::vector<double> reduceAll(DType dtype, const void* data, size_t numel,
                              const std::vector<Reduction>& requests);

}  // namespace strata::debugger
