#include "params_digest.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "../common/sha256.h"
#include "strata/runtime.h"

namespace lm {
namespace {

using examples::Sha256;

std::string tensorDigest(const torch::Tensor& value) {
  const torch::Tensor t = value.detach().contiguous();
  Sha256 sha;
  std::ostringstream header;
  header << t.dtype() << " " << t.sizes() << "\n";
  sha.add(header.str());
  sha.add(t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
  return sha.hex();
}

// Rank 0 receives every rank's text (the others get an empty vector).
std::vector<std::string> gatherToRankZero(const std::string& mine) {
  strata::Group& world = strata::world();
  int64_t length = static_cast<int64_t>(mine.size());
  world.allreduce(&length, &length, 1, strata::DType::kInt64, strata::ReduceOp::kMax);
  std::string padded = mine;
  padded.resize(static_cast<size_t>(length), '\0');
  std::string all(static_cast<size_t>(length) * static_cast<size_t>(world.size()), '\0');
  world.allgather(padded.data(), all.data(), static_cast<size_t>(length), strata::DType::kUInt8);
  std::vector<std::string> out;
  if (world.rank() != 0) return out;
  for (int r = 0; r < world.size(); ++r) {
    std::string text = all.substr(static_cast<size_t>(r * length), static_cast<size_t>(length));
    text.resize(text.find('\0') == std::string::npos ? text.size() : text.find('\0'));
    out.push_back(std::move(text));
  }
  return out;
}

// "<path> <digest>" lines of every rank -> one digest, or a clear error.
std::string combine(const std::vector<std::string>& perRank) {
  std::map<std::string, std::pair<std::string, int>> byPath;  // path -> (digest, rank)
  for (size_t r = 0; r < perRank.size(); ++r) {
    std::istringstream lines(perRank[r]);
    std::string path, digest;
    while (lines >> path >> digest) {
      auto [it, inserted] = byPath.emplace(path, std::make_pair(digest, static_cast<int>(r)));
      if (!inserted && it->second.first != digest)
        throw std::runtime_error("params_sha256: the copies of \"" + path + "\" on rank " +
                                 std::to_string(it->second.second) + " and rank " + std::to_string(r) +
                                 " differ (a tied weight out of sync?)");
    }
  }
  Sha256 sha;
  for (const auto& [path, value] : byPath) sha.add(path + " " + value.first + "\n");
  return sha.hex();
}

}  // namespace

std::string paramsSha256(strata::DistributedModel& model, const std::map<std::string, std::string>& aliases) {
  std::string mine;
  if (model.dp_rank() == 0) {  // replicas hold the same values: one of them reports
    for (const auto& item : model.local_state_dict()) {
      const auto alias = aliases.find(item.key());
      mine += (alias == aliases.end() ? item.key() : alias->second) + " " + tensorDigest(item.value()) + "\n";
    }
  }
  const std::vector<std::string> perRank = gatherToRankZero(mine);
  std::string result(64, '\0');
  std::string error;
  if (strata::rank() == 0) {
    try {
      result = combine(perRank);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  int32_t failed = error.empty() ? 0 : 1;
  strata::world().broadcast(&failed, 1, strata::DType::kInt32, 0);
  if (failed) throw std::runtime_error(strata::rank() == 0 ? error : "params_sha256 failed on rank 0");
  strata::world().broadcast(result.data(), result.size(), strata::DType::kUInt8, 0);
  return result;
}

}  // namespace lm
