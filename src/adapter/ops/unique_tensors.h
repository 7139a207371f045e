// Which tensors are the same tensor: tied uses of one weight are distinct tensor objects over
// one storage, so optimizers, reducers and checkpoints key tensors by their memory, not by
// the object.
#pragma once

#include <torch/types.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace strata::adapter {

// Same storage, place, shape and dtype: the same values. The uses of a tied weight on one
// rank are distinct tensors over one storage, so this, not the tensor object, identifies it.
using TensorKey = std::tuple<const void*, std::vector<int64_t>, c10::ScalarType>;
TensorKey tensorKey(const torch::Tensor& t);

// The tensors without repeats: a tensor registered by two modules, or tied uses sharing one
// storage, count once (optimizers must see a tied tensor once, or they step it twice).
std::vector<torch::Tensor> uniqueTensors(const std::vector<torch::Tensor>& tensors);
std::vector<std::pair<std::string, torch::Tensor>> uniqueTensors(
    const std::vector<std::pair<std::string, torch::Tensor>>& named);

}  // namespace strata::adapter
