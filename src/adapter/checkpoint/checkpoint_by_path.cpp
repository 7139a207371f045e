#include "adapter/checkpoint/checkpoint_by_path.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <typeinfo>

#include "adapter/ops/agreement.h"
#include "adapter/checkpoint/checkpoint_state.h"
#include "adapter/checkpoint/optimizer_state_by_path.h"
#include "core/errors.h"
#include "strata/runtime.h"

namespace strata::detail {
namespace {

namespace ck = strata::checkpoint;
namespace fs = std::filesystem;
using torch::serialize::InputArchive;

std::vector<std::pair<std::string, torch::Tensor>> localTensors(DistributedModel& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : model.local_state_dict()) out.emplace_back(item.key(), item.value());
  return out;
}

// Every rank's text on every rank (collective over the world).
std::vector<std::string> allgatherText(const std::string& mine) {
  Group& w = world();
  int64_t length = static_cast<int64_t>(mine.size());
  w.allreduce(&length, &length, 1, DType::kInt64, ReduceOp::kMax);
  std::string padded = mine;
  padded.resize(static_cast<size_t>(length), '\0');
  std::string all(static_cast<size_t>(length) * static_cast<size_t>(w.size()), '\0');
  if (length > 0) w.allgather(padded.data(), all.data(), static_cast<size_t>(length), DType::kUInt8);
  std::vector<std::string> out;
  for (int r = 0; r < w.size(); ++r) {
    std::string text = all.substr(static_cast<size_t>(r) * static_cast<size_t>(length), static_cast<size_t>(length));
    text.resize(std::min(text.size(), text.find('\0')));
    out.push_back(std::move(text));
  }
  return out;
}

// The whole model's tensors: the union of what every rank holds (a pipeline rank holds its
// stages; replicas and the copies of a tied weight repeat paths). Collective.
std::vector<ck::TensorEntry> wholeModelTensors(DistributedModel& model) {
  nlohmann::json mine = nlohmann::json::array();
  for (const auto& [path, tensor] : localTensors(model)) {
    const ck::TensorEntry e = describeTensor(path, tensor, false);
    mine.push_back({e.path, e.dtype, e.shape});
  }
  std::map<std::string, ck::TensorEntry> byPath;
  for (const std::string& text : allgatherText(mine.dump())) {
    for (const auto& item : nlohmann::json::parse(text)) {
      ck::TensorEntry e;
      e.path = item.at(0).get<std::string>();
      e.dtype = item.at(1).get<std::string>();
      e.shape = item.at(2).get<std::vector<int64_t>>();
      byPath.emplace(e.path, std::move(e));
    }
  }
  std::vector<ck::TensorEntry> out;
  for (auto& item : byPath) out.push_back(std::move(item.second));
  return out;
}

}  // namespace

ByPathCheckpoint::ByPathCheckpoint(const std::string& dir, const ck::Manifest& manifest, DistributedModel& model)
    : dir_(dir) {
  const int rank = world().rank();
  std::string error;
  try {
    std::vector<ck::TensorIndex> indexes;
    size_t rankZeroShard = 0;
    for (size_t s = 0; s < manifest.shards.size(); ++s) {
      const ck::ShardInfo& shard = manifest.shards[s];
      const std::string path = (fs::path(dir) / shard.file).string();
      const uint64_t bytes = fs::file_size(path);
      STRATA_CHECK(bytes == shard.bytes, "checkpoint shard ", path, " has ", bytes, " bytes, its manifest says ",
                   shard.bytes);
      readers_.push_back(std::make_unique<TensorShardReader>(path));
      indexes.push_back(readers_.back()->index());
      files_.push_back(shard.file);
      if (shard.rank == 0) rankZeroShard = s;
      if (shard.rank == rank) {
        stateShard_ = s;
        ownShard_ = true;
      }
    }
    if (!ownShard_) stateShard_ = rankZeroShard;
    catalog_ = std::make_unique<ck::ShardCatalog>(indexes, files_, stateShard_);
  } catch (const std::exception& e) {
    error = adapter::trimmed(e.what());
  }
  adapter::agreeOrThrow(error.empty(), error, "checkpoint " + dir + ": reading its shards");
  // Every rank compares the same two lists, so every rank throws the same words.
  const std::vector<ck::TensorEntry> wanted = wholeModelTensors(model);
  if (const std::optional<std::string> diff = ck::firstDifference(catalog_->entries(), wanted))
    STRATA_THROW(Error, "checkpoint ", dir, " was written by a different model: ", *diff);
}

ByPathCheckpoint::~ByPathCheckpoint() = default;

void ByPathCheckpoint::restoreTensors(DistributedModel& model) {
  for (auto& [path, tensor] : localTensors(model)) {
    const std::optional<ck::ShardCatalog::Location> at = catalog_->tensor(path);
    STRATA_CHECK(at.has_value(), "checkpoint ", dir_, " does not hold \"", path, "\"");
    readers_[at->shard]->readInto(at->storedPath, tensor);
  }
}

void ByPathCheckpoint::restoreOptimizer(DistributedModel& model, DistributedOptimizer& optimizer, bool sameLayout) {
  // With host-shared parameters: an optimizer over this rank's whole parameters, whose state
  // state_loaded() then hands to the host's copy (both collective).
  torch::optim::Optimizer& opt = optimizer.state_optimizer();
  const std::string kind = stateByPathKind(opt);
  if (kind.empty()) {  // the whole save() archive, positional: the same layout only
    STRATA_CHECK(sameLayout && ownShard_, "checkpoint ", dir_, ": this optimizer (", typeid(opt).name(),
                 ") keeps no per-parameter state Strata can key by parameter path (supported: SGD, Adam, AdamW, "
                 "Adagrad, RMSprop), so its state resumes only on the layout that wrote it");
    InputArchive root = stateArchive(nullptr);
    InputArchive state, saved;
    root.read(kStateArchiveKey, state);
    STRATA_CHECK(state.try_read("optimizer", saved), "checkpoint ", dir_, " shard ", files_[stateShard_],
                 " holds no optimizer archive (it was written with a ", catalog_->optimizerKind(), " optimizer)");
    opt.load(saved);
    return;
  }
  const auto slots = slotsByPath(opt, localTensors(model));
  STRATA_CHECK(slots.empty() || !catalog_->optimizerKind().empty(), "checkpoint ", dir_,
               " holds no optimizer state by parameter path (its optimizer had no per-parameter form); this "
               "optimizer is ",
               kind);
  for (const auto& [path, slot] : slots) {
    const std::optional<ck::ShardCatalog::Record> record = catalog_->optimizerState(path);
    STRATA_CHECK(record.has_value(), "checkpoint ", dir_, " holds no optimizer state for \"", path, "\"");
    InputArchive entry = readers_[record->shard]->readArchive(record->record);
    readEntry(entry, opt, slot, catalog_->optimizerKind(), files_[record->shard]);
  }
  optimizer.state_loaded();
}

InputArchive ByPathCheckpoint::stateArchive(bool* own) {
  if (own) *own = ownShard_;
  TensorShardReader& reader = *readers_[stateShard_];
  STRATA_CHECK(!reader.index().stateRecord.empty(), "checkpoint shard ", files_[stateShard_],
               " holds no training state");
  return reader.readArchive(reader.index().stateRecord);
}

}  // namespace strata::detail
