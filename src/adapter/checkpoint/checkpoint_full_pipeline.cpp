#include "adapter/checkpoint/checkpoint_full_pipeline.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "adapter/ops/agreement.h"
#include "adapter/checkpoint/tensor_shard.h"
#include "checkpoint/tensor_index.h"
#include "checkpoint/writer.h"
#include "core/errors.h"
#include "core/logging.h"
#include "strata/runtime.h"

namespace strata::detail {
namespace {

namespace ck = strata::checkpoint;

// Tags of the stage stream ("CKFP" in the high bits): the request, the index of the stage's
// tensors, the tensors' bytes, the optimizer entries. Messages between two ranks arrive in
// order, and at a step boundary no pipeline traffic is in flight.
constexpr uint64_t kTagBase = 0x434b465000000000ull;
constexpr uint64_t kTagRequest = kTagBase + 1;
constexpr uint64_t kTagIndex = kTagBase + 2;
constexpr uint64_t kTagTensor = kTagBase + 3;
constexpr uint64_t kTagOptimizer = kTagBase + 4;
// The optimizer entries end with this length pair.
constexpr int64_t kEndOfEntries = -1;

size_t tensorBytes(const torch::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

// The stage's tensors as a TensorIndex: stored tensors get the record "t<i>" (their place in
// the stream), a second path of one storage is an alias.
ck::TensorIndex stageIndex(const ShardContent& c) {
  ck::TensorIndex index;
  index.optimizerKind = c.optimizerKind;
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    ck::TensorEntry e = describeTensor(c.names[i], c.tensors[i], c.isBuffer[i]);
    if (c.aliasOf[i] >= 0) e.aliasOf = c.names[static_cast<size_t>(c.aliasOf[i])];
    else e.record = "t" + std::to_string(i);
    index.tensors.push_back(std::move(e));
  }
  return index;
}

void sendText(Group& w, const std::string& text, int dst, uint64_t tag) {
  const int64_t length = static_cast<int64_t>(text.size());
  w.send(&length, sizeof(length), dst, tag);
  if (length > 0) w.send(text.data(), text.size(), dst, tag);
}

std::string recvText(Group& w, int src, uint64_t tag) {
  int64_t length = 0;
  w.recv(&length, sizeof(length), src, tag);
  std::string text(static_cast<size_t>(length), '\0');
  if (length > 0) w.recv(text.data(), text.size(), src, tag);
  return text;
}

// A stage holder: waits for rank 0's request, then streams its stage from its own tensors.
void sendStage(Group& w, const ShardContent& c) {
  int64_t wanted = 0;
  w.recv(&wanted, sizeof(wanted), 0, kTagRequest);
  if (!wanted) return;  // rank 0 failed before this stage: nothing to send
  sendText(w, ck::toJson(stageIndex(c)).dump(), 0, kTagIndex);
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    if (c.aliasOf[i] >= 0 || tensorBytes(c.tensors[i]) == 0) continue;
    const torch::Tensor t = c.tensors[i].contiguous();
    w.send(t.data_ptr(), tensorBytes(t), 0, kTagTensor);
  }
  if (!c.optimizerKind.empty())
    c.forEachOptimizerEntry([&](const std::string& path, const std::string& bytes) {
      sendText(w, path, 0, kTagOptimizer);
      sendText(w, bytes, 0, kTagOptimizer);
    });
  const int64_t end = kEndOfEntries;
  w.send(&end, sizeof(end), 0, kTagOptimizer);
}

// Rank 0's side: writes into the file while the stream goes on; after the first write error
// it keeps receiving (so no sender blocks) and drops what arrives.
class StageReceiver {
 public:
  StageReceiver(Group& w, TensorShardWriter& writer, const ShardContent& own) : w_(w), writer_(writer) {
    writtenTensors_.insert(own.names.begin(), own.names.end());
    for (const auto& slot : own.optimizerSlots) writtenEntries_.insert(slot.first);
  }

  void receive(int src) {
    const int64_t wanted = error_.empty() ? 1 : 0;
    w_.send(&wanted, sizeof(wanted), src, kTagRequest);
    if (!wanted) return;
    const ck::TensorIndex index =
        ck::parseTensorIndex(recvText(w_, src, kTagIndex), "the stage index of rank " + std::to_string(src));
    for (const ck::TensorEntry& e : index.tensors) {
      if (!e.record.empty() && entryBytes(e) > 0) {
        buffer_.resize(entryBytes(e));
        w_.recv(buffer_.data(), buffer_.size(), src, kTagTensor);
      }
      if (!writtenTensors_.insert(e.path).second) continue;
      write([&] {
        if (e.record.empty()) writer_.addAlias(e);
        else writer_.addTensorBytes(e, buffer_.data(), entryBytes(e));
      });
    }
    for (;;) {
      int64_t length = 0;
      w_.recv(&length, sizeof(length), src, kTagOptimizer);
      if (length == kEndOfEntries) break;
      std::string path(static_cast<size_t>(length), '\0');
      if (length > 0) w_.recv(path.data(), path.size(), src, kTagOptimizer);
      const std::string bytes = recvText(w_, src, kTagOptimizer);
      if (writtenEntries_.insert(path).second)
        write([&] { writer_.addOptimizerState(index.optimizerKind, path, bytes); });
    }
    buffer_.clear();
    buffer_.shrink_to_fit();
  }

  template <typename F>
  void write(F&& f) {
    if (!error_.empty()) return;
    try {
      f();
    } catch (const std::exception& e) {
      error_ = adapter::trimmed(e.what());
    }
  }

  const std::string& error() const { return error_; }

 private:
  Group& w_;
  TensorShardWriter& writer_;
  std::set<std::string> writtenTensors_, writtenEntries_;
  std::vector<char> buffer_;  // one incoming tensor
  std::string error_;
};

// World ranks holding pipeline stages 1..pp-1 in rank 0's data-parallel replica, in stage order.
std::vector<int> stageHolders(Group& w, DistributedModel& model) {
  int32_t mine[2] = {model.pp_rank(), model.dp_rank()};
  std::vector<int32_t> all(2 * static_cast<size_t>(w.size()));
  w.allgather(mine, all.data(), 2, DType::kInt32);
  std::vector<std::pair<int32_t, int>> holders;
  for (int r = 1; r < w.size(); ++r)
    if (all[2 * r + 1] == all[1] && all[2 * r] != all[0]) holders.emplace_back(all[2 * r], r);
  std::sort(holders.begin(), holders.end());
  std::vector<int> out;
  for (const auto& h : holders) out.push_back(h.second);
  return out;
}

}  // namespace

ck::ShardRecord writeFullPipelineShard(const std::string& ckptDir, const std::string& file, DistributedModel& model,
                                       const ShardContent& content) {
  Group& w = world();
  const int rank = w.rank();
  ck::ShardRecord mine = ck::makeShardRecord(rank, model.pp_rank());
  const std::vector<int> holders = stageHolders(w, model);
  if (rank != 0) {
    try {
      if (std::find(holders.begin(), holders.end(), rank) != holders.end()) sendStage(w, content);
    } catch (const std::exception& e) {
      ck::markFailed(mine, adapter::trimmed(e.what()));
    }
    return mine;
  }
  size_t asked = 0;  // holders whose stage was requested
  try {
    ck::markWritten(mine, ck::writeShard(ckptDir, file, [&](const ck::ByteSink& sink) {
      TensorShardWriter writer(sink);
      StageReceiver receiver(w, writer, content);
      receiver.write([&] { writeTensorsByPath(writer, content); });
      while (asked < holders.size()) {
        const int holder = holders[asked++];
        receiver.receive(holder);
        STRATA_LOG(kDebug, kInit, "full checkpoint: the stage of rank ", holder, " written");
      }
      receiver.write([&] { finishByPath(writer, content); });
      STRATA_CHECK(receiver.error().empty(), "writing ", file, ": ", receiver.error());
    }));
  } catch (const std::exception& e) {
    ck::markFailed(mine, adapter::trimmed(e.what()));
    // Holders not asked yet wait for a request: tell them there is nothing to send.
    const int64_t none = 0;
    for (; asked < holders.size(); ++asked) {
      try {
        w.send(&none, sizeof(none), holders[asked], kTagRequest);
      } catch (const std::exception&) {
        // the holder's own wait times out and reports it
      }
    }
  }
  return mine;
}

}  // namespace strata::detail
