#include "pipeline/adapter/owner_profile.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>

#include "core/errors.h"
#include "core/logging.h"
#include "adapter/ops/agreement.h"

namespace strata::pipeline {
namespace {

// Tags of the sample's trip down the pipeline (apart from the executor's and the link ping's).
constexpr uint64_t kSampleHeaderTag = (uint64_t{0x50} << 56) | (uint64_t{3} << 48);
constexpr uint64_t kSamplePayloadTag = kSampleHeaderTag | 1;

// Every rank throws the lowest failing rank's error: a ConfigError stays one (the user's
// input is at fault), anything else becomes strata::Error naming the rank.
void agreeOnProfileError(Group& world, const std::exception_ptr& error) {
  char kind = 'E';
  std::string text;
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const ConfigError& e) {
      kind = 'C';
      text = e.what_without_backtrace();
    } catch (const c10::Error& e) {
      text = e.what_without_backtrace();
    } catch (const std::exception& e) {
      text = e.what();
    }
  }
  int32_t failing = error ? world.rank() : std::numeric_limits<int32_t>::max();
  world.allreduce(&failing, &failing, 1, DType::kInt32, ReduceOp::kMin);
  if (failing == std::numeric_limits<int32_t>::max()) return;
  std::string message = kind + text;
  adapter::broadcastString(world, message, failing);
  kind = message.front();
  message.erase(message.begin());
  if (kind == 'C')
    throw ConfigError(world.rank() == failing ? message
                                              : c10::str(rankTag(), " from world rank ", failing, ": ", message));
  STRATA_THROW(Error, "profiling the model's layers failed on rank ", failing, ": ", message);
}

// The input of this rank's block: the sample on pipeline rank 0, else what the upstream
// block made of it. An undefined tensor when upstream failed (its error is agreed on next).
torch::Tensor receiveBlockInput(const OwnerProfileSetup& s, const torch::Tensor& sample) {
  if (s.ppRank == 0) return sample;
  Group& g = *s.pipelineGroup;
  int64_t length = 0;
  g.recv(&length, sizeof(length), s.ppRank - 1, kSampleHeaderTag);
  std::vector<int64_t> header(static_cast<size_t>(length));
  g.recv(header.data(), header.size() * sizeof(int64_t), s.ppRank - 1, kSampleHeaderTag);
  if (header.empty() || header[0] == 0) return {};
  std::vector<int64_t> sizes(header.begin() + 2, header.end());
  torch::Tensor x = torch::empty(sizes, torch::TensorOptions().dtype(static_cast<c10::ScalarType>(header[1])));
  if (x.nbytes() > 0) g.recv(x.data_ptr(), x.nbytes(), s.ppRank - 1, kSamplePayloadTag);
  return x;
}

void sendBlockOutput(const OwnerProfileSetup& s, const torch::Tensor& out) {
  if (s.ppRank + 1 >= s.partitions) return;
  Group& g = *s.pipelineGroup;
  const torch::Tensor y = out.defined() ? out.contiguous() : out;
  std::vector<int64_t> header{y.defined() ? 1 : 0};
  if (y.defined()) {
    header.push_back(static_cast<int64_t>(y.scalar_type()));
    for (int64_t d : y.sizes()) header.push_back(d);
  }
  const auto length = static_cast<int64_t>(header.size());
  g.send(&length, sizeof(length), s.ppRank + 1, kSampleHeaderTag);
  g.send(header.data(), header.size() * sizeof(int64_t), s.ppRank + 1, kSampleHeaderTag);
  if (y.defined() && y.nbytes() > 0) g.send(y.data_ptr(), y.nbytes(), s.ppRank + 1, kSamplePayloadTag);
}

}  // namespace

std::vector<std::string> allgatherStrings(Group& group, const std::string& text) {
  const auto n = static_cast<size_t>(group.size());
  int64_t mine = static_cast<int64_t>(text.size());
  std::vector<int64_t> lengths(n);
  group.allgather(&mine, lengths.data(), 1, DType::kInt64);
  const auto longest = static_cast<size_t>(*std::max_element(lengths.begin(), lengths.end()));
  std::vector<char> padded(longest, '\0'), all(longest * n);
  std::memcpy(padded.data(), text.data(), text.size());
  if (longest > 0) group.allgather(padded.data(), all.data(), longest, DType::kUInt8);
  std::vector<std::string> out;
  for (size_t r = 0; r < n; ++r) out.emplace_back(all.data() + r * longest, static_cast<size_t>(lengths[r]));
  return out;
}

LayerProfile profileOnOwners(const OwnerProfileSetup& s, const torch::Tensor& sample, Group& world,
                             const ProfileOptions& options) {
  // The block's input: one forward down the pipeline, each rank through its own block.
  std::exception_ptr error;
  torch::Tensor input, output;
  try {
    input = receiveBlockInput(s, sample);
    if (input.defined()) output = forwardLayers(s.names, s.acquire, input, s.block);
  } catch (...) {
    error = std::current_exception();
  }
  try {
    sendBlockOutput(s, output);
  } catch (...) {
    if (!error) error = std::current_exception();
  }
  agreeOnProfileError(world, error);

  // Every rank measures its block at once.
  std::string part;
  try {
    part = partialProfileToJson(profileLayerRange(s.names, s.acquire, s.ties, input, s.block, options));
  } catch (...) {
    error = std::current_exception();
  }
  agreeOnProfileError(world, error);
  STRATA_LOG(kDebug, kPipe, "profiled layers ", s.block.begin, "..", s.block.end - 1, " on pipeline rank ",
             s.ppRank);

  // Pipeline 0's parts, in pipeline-rank order, on every rank.
  const std::vector<std::string> parts = allgatherStrings(world, part);
  std::vector<PartialProfile> mine;
  for (int worldRank : s.firstPipelineWorldRanks)
    mine.push_back(partialProfileFromJson(parts.at(static_cast<size_t>(worldRank))));
  return mergeProfiles(std::move(mine), s.names.size(), s.ties, options);
}

}  // namespace strata::pipeline
