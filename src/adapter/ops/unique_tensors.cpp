#include "adapter/ops/unique_tensors.h"

#include <set>

namespace strata::adapter {

TensorKey tensorKey(const torch::Tensor& t) {
  const void* where = t.numel() > 0 ? t.data_ptr() : static_cast<const void*>(t.unsafeGetTensorImpl());
  return {where, t.sizes().vec(), t.scalar_type()};
}

std::vector<torch::Tensor> uniqueTensors(const std::vector<torch::Tensor>& tensors) {
  std::set<TensorKey> seen;
  std::vector<torch::Tensor> out;
  for (const auto& t : tensors)
    if (!t.defined() || seen.insert(tensorKey(t)).second) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> uniqueTensors(
    const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  std::set<TensorKey> seen;
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : named)
    if (!item.second.defined() || seen.insert(tensorKey(item.second)).second) out.push_back(item);
  return out;
}

}  // namespace strata::adapter
