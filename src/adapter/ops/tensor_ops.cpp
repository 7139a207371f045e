#include "strata/tensor_ops.h"

#include "core/errors.h"
#include "strata/runtime.h"

namespace strata {
namespace {

Group& groupOr(Group* group) { return group ? *group : world(); }

void checkTensor(const torch::Tensor& t, const char* what) {
  STRATA_CHECK(t.defined(), what, ": the tensor is undefined");
  STRATA_CHECK(t.device().is_cpu(), what, ": tensor on ", t.device().str(),
               " (only CPU tensors are supported: the NCCL communicator is not wired to tensors yet)");
}

}  // namespace

bool dtypeOf(c10::ScalarType type, DType* out) {
  switch (type) {
    case c10::ScalarType::Float: *out = DType::kFloat32; return true;
    case c10::ScalarType::Double: *out = DType::kFloat64; return true;
    case c10::ScalarType::Half: *out = DType::kFloat16; return true;
    case c10::ScalarType::BFloat16: *out = DType::kBFloat16; return true;
    case c10::ScalarType::Char: *out = DType::kInt8; return true;
    case c10::ScalarType::Short: *out = DType::kInt16; return true;
    case c10::ScalarType::Int: *out = DType::kInt32; return true;
    case c10::ScalarType::Long: *out = DType::kInt64; return true;
    case c10::ScalarType::Byte: *out = DType::kUInt8; return true;
    case c10::ScalarType::Bool: *out = DType::kBool; return true;
    default: return false;
  }
}

c10::ScalarType scalarTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return c10::ScalarType::Float;
    case DType::kFloat64: return c10::ScalarType::Double;
    case DType::kFloat16: return c10::ScalarType::Half;
    case DType::kBFloat16: return c10::ScalarType::BFloat16;
    case DType::kInt8: return c10::ScalarType::Char;
    case DType::kInt16: return c10::ScalarType::Short;
    case DType::kInt32: return c10::ScalarType::Int;
    case DType::kInt64: return c10::ScalarType::Long;
    case DType::kUInt8: return c10::ScalarType::Byte;
    case DType::kBool: return c10::ScalarType::Bool;
    case DType::kString: break;
  }
  STRATA_THROW(Error, "no tensor type holds strata dtype ", dtypeName(dtype));
}

DType toDType(const c10::ScalarType type) {
  DType dtype;
  STRATA_CHECK(dtypeOf(type, &dtype) && isCollectiveDType(dtype), "collectives do not support tensors of dtype ",
               c10::toString(type));
  return dtype;
}

void allreduce(torch::Tensor& tensor, ReduceOp op, Group* group) {
  checkTensor(tensor, "allreduce");
  torch::Tensor dense = tensor.is_contiguous() ? tensor : tensor.contiguous();
  groupOr(group).allreduce(dense.data_ptr(), dense.data_ptr(), static_cast<size_t>(dense.numel()),
                           toDType(dense.scalar_type()), op);
  if (!dense.is_same(tensor)) tensor.copy_(dense);
}

std::shared_ptr<Work> allreduceAsync(torch::Tensor& tensor, ReduceOp op, Group* group) {
  checkTensor(tensor, "allreduceAsync");
  STRATA_CHECK(tensor.is_contiguous(), "allreduceAsync needs a contiguous tensor");
  return groupOr(group).allreduceAsync(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                                       toDType(tensor.scalar_type()), op);
}

void broadcast(torch::Tensor& tensor, int root, Group* group) {
  checkTensor(tensor, "broadcast");
  torch::Tensor dense = tensor.is_contiguous() ? tensor : tensor.contiguous();
  groupOr(group).broadcast(dense.data_ptr(), static_cast<size_t>(dense.numel()), toDType(dense.scalar_type()), root);
  if (!dense.is_same(tensor)) tensor.copy_(dense);
}

torch::Tensor allgather(const torch::Tensor& tensor, Group* group) {
  checkTensor(tensor, "allgather");
  Group& g = groupOr(group);
  torch::Tensor dense = tensor.contiguous();
  std::vector<int64_t> shape{g.size()};
  for (int64_t d : dense.sizes()) shape.push_back(d);
  torch::Tensor out = torch::empty(shape, dense.options());
  g.allgather(dense.data_ptr(), out.data_ptr(), static_cast<size_t>(dense.numel()), toDType(dense.scalar_type()));
  return out;
}

void barrier(Group* group) { groupOr(group).barrier(); }

}  // namespace strata
