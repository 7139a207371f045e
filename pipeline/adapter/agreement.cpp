#include "pipeline/adapter/agreement.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/errors.h"

namespace strata::pipeline {

void broadcastString(Group& group, std::string& text, int root) {
  int64_t length = static_cast<int64_t>(text.size());
  group.broadcast(&length, 1, DType::kInt64, root);
  text.resize(static_cast<size_t>(length));
  if (length > 0) group.broadcast(text.data(), text.size(), DType::kUInt8, root);
}

void agreeOnError(Group& group, const std::string& error, const std::string& what) {
  int32_t failing = error.empty() ? std::numeric_limits<int32_t>::max() : group.rank();
  group.allreduce(&failing, &failing, 1, DType::kInt32, ReduceOp::kMin);
  if (failing == std::numeric_limits<int32_t>::max()) return;
  std::string message = error;
  broadcastString(group, message, failing);
  // The same words on every rank, the failing one included, so its log says which rank too.
  STRATA_THROW(Error, what, " failed on rank ", failing, ": ", message);
}

}  // namespace strata::pipeline
