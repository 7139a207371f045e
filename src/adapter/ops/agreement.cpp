#include "adapter/ops/agreement.h"

#include <cstdint>
#include <limits>

#include "core/errors.h"
#include "strata/runtime.h"

namespace strata::adapter {
namespace {

constexpr int32_t kNoFailure = std::numeric_limits<int32_t>::max();

// The lowest failing rank (kNoFailure when none failed).
int32_t lowestFailingRank(Group& group, bool failed) {
  int32_t failing = failed ? group.rank() : kNoFailure;
  group.allreduce(&failing, &failing, 1, DType::kInt32, ReduceOp::kMin);
  return failing;
}

}  // namespace

void broadcastString(Group& group, std::string& text, int root) {
  int64_t length = static_cast<int64_t>(text.size());
  group.broadcast(&length, 1, DType::kInt64, root);
  text.resize(static_cast<size_t>(length));
  if (length > 0) group.broadcast(text.data(), text.size(), DType::kUInt8, root);
}

std::string firstError(Group& group, const std::string& error) {
  const int32_t failing = lowestFailingRank(group, !error.empty());
  if (failing == kNoFailure) return "";
  std::string message = error;
  broadcastString(group, message, failing);
  return message;
}

void agreeOnError(Group& group, const std::string& error, const std::string& what) {
  const int32_t failing = lowestFailingRank(group, !error.empty());
  if (failing == kNoFailure) return;
  std::string message = error;
  broadcastString(group, message, failing);
  // The same words on every rank, the failing one included, so its log says which rank too.
  STRATA_THROW(Error, what, " failed on rank ", failing, ": ", message);
}

void agreeOrThrow(bool ok, const std::string& error, const std::string& what) {
  agreeOnError(world(), ok ? std::string() : error.empty() ? "(no reason given)" : error, what);
}

std::string agreeOnError(bool ok, const std::string& error) {
  return firstError(world(), ok ? std::string() : error.empty() ? "(no reason given)" : error);
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace strata::adapter
