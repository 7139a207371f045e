// Collectives on libtorch tensors (the thin adapter over strata::Group).
// CPU tensors of float32/float64/float16/bfloat16/int32/int64/uint8, contiguous or not
// (non-contiguous tensors are reduced through a contiguous copy).
#pragma once

#include <torch/types.h>

#include <memory>

#include "strata/group.h"

namespace strata {

// In place, over `group` (default: the world). Out-of-band metrics use these too
// (SageMaker's oob_allreduce).
void allreduce(torch::Tensor& tensor, ReduceOp op = ReduceOp::kSum, Group* group = nullptr);
std::shared_ptr<Work> allreduceAsync(torch::Tensor& tensor, ReduceOp op = ReduceOp::kSum, Group* group = nullptr);
void broadcast(torch::Tensor& tensor, int root, Group* group = nullptr);
// Returns a tensor of shape [size, *tensor.shape] holding every rank's tensor.
torch::Tensor allgather(const torch::Tensor& tensor, Group* group = nullptr);
void barrier(Group* group = nullptr);

// The strata dtype of a tensor; throws strata::Error naming the dtype when unsupported.
DType toDType(const c10::ScalarType type);
// Any tensor type Strata knows (the debugger's too: int8, int16, bool): false for others.
bool dtypeOf(c10::ScalarType type, DType* out);
// The tensor type of a strata dtype (the inverse of dtypeOf); throws for kString.
c10::ScalarType scalarTypeOf(DType dtype);

}  // namespace strata
