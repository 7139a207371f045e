#include "adapter/ops/model_signature.h"

#include <sstream>

#include "core/errors.h"

namespace strata::detail {
namespace {

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string firstDifference(const std::string& theirs, const std::string& mine) {
  const auto a = lines(theirs), b = lines(mine);
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "<nothing>";
    const std::string y = i < b.size() ? b[i] : "<nothing>";
    if (x != y) return c10::str("entry ", i, ": rank 0 has \"", x, "\", this rank has \"", y, "\"");
  }
  return "the descriptions differ";
}

}  // namespace

std::string describeModel(const torch::nn::Module& module) {
  std::ostringstream out;
  for (const auto& p : module.named_parameters(/*recurse=*/true))
    out << "parameter " << p.key() << " " << p.value().dtype() << " " << p.value().sizes() << "\n";
  for (const auto& b : module.named_buffers(/*recurse=*/true))
    out << "buffer " << b.key() << " " << b.value().dtype() << " " << b.value().sizes() << "\n";
  return out.str();
}

namespace {

// Collective: empty when every rank's description equals rank 0's, else "rank(s) <list>
// differ from rank 0); <first difference or 'this rank matches rank 0'>" (same on every
// rank except the detail).
std::string differenceFromRankZero(Group& group, const std::string& description) {
  const int n = group.size();
  if (n == 1) return "";
  const int64_t mine = static_cast<int64_t>(fnv1a(description));
  std::vector<int64_t> all(static_cast<size_t>(n));
  group.allgather(&mine, all.data(), 1, DType::kInt64);
  std::vector<int> differing;
  for (int r = 0; r < n; ++r)
    if (all[r] != all[0]) differing.push_back(r);
  if (differing.empty()) return "";
  // Every rank takes this branch (same gathered hashes): share rank 0's description.
  int64_t length = static_cast<int64_t>(description.size());
  group.broadcast(&length, 1, DType::kInt64, 0);
  std::string reference(static_cast<size_t>(length), '\0');
  if (group.rank() == 0) reference = description;
  group.broadcast(reference.data(), reference.size(), DType::kUInt8, 0);
  std::string ranks;
  for (int r : differing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  const std::string detail = all[group.rank()] == all[0] ? "this rank matches rank 0"
                                                          : firstDifference(reference, description);
  return c10::str("rank(s) ", ranks, " differ from rank 0); ", detail);
}

}  // namespace

void checkModelsMatch(Group& group, const std::string& description) {
  const std::string difference = differenceFromRankZero(group, description);
  if (!difference.empty()) STRATA_THROW(Error, "DistributedModel: ranks built different models (", difference);
}

std::string describeModelParallel(const config::ModelParallelConfig& mp) {
  config::JobConfig job;
  job.modelParallel = mp;
  const nlohmann::json settings = config::toJson(job).at("modelparallel");  // a copy: the loop outlives toJson's result
  std::ostringstream out;
  for (const auto& item : settings.items()) out << item.key() << ": " << item.value().dump() << "\n";
  return out.str();
}

void checkModelParallelConfigsMatch(Group& group, const std::string& description) {
  const std::string difference = differenceFromRankZero(group, description);
  if (!difference.empty())
    STRATA_THROW(ConfigError, "/modelparallel: every rank must be given the same settings, but (", difference);
}

}  // namespace strata::detail
