// strata::save / strata::load: the libtorch side of synchronous checkpoints. The torch-free
// core (src/checkpoint/) owns the on-disk protocol; checkpoint_state.cpp turns the training
// state into archives; this file runs the collective steps (checkpoint/writer.h gives the
// order). CheckpointManager: checkpoint_manager.cpp; background writes: checkpoint_async.cpp.
#include "adapter/ops/agreement.h"
#include "strata/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/types.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include "adapter/checkpoint/checkpoint_by_path.h"
#include "adapter/checkpoint/checkpoint_full_pipeline.h"
#include "adapter/checkpoint/optimizer_state_by_path.h"
#include "adapter/checkpoint/checkpoint_state.h"
#include "checkpoint/catalog.h"
#include "checkpoint/publication.h"
#include "checkpoint/writer.h"
#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/logging.h"
#include "debugger/torch_hook.h"
#include "profiler/session.h"
#include "runtime/runtime_internal.h"
#include "strata/runtime.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
namespace ck = strata::checkpoint;
using torch::serialize::InputArchive;
using torch::serialize::OutputArchive;

void setCpuRngState(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

std::vector<int64_t> readInt64s(InputArchive& archive, const std::string& key) {
  torch::Tensor t;
  archive.read(key, t, /*is_buffer=*/true);
  t = t.contiguous().to(torch::kInt64);
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

std::string readText(InputArchive& archive, const std::string& key) {
  torch::Tensor t;
  archive.read(key, t, /*is_buffer=*/true);
  t = t.contiguous();
  return std::string(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()));
}

void restoreDebuggerCounters(const std::vector<int64_t>& values) {
  debugger::TorchHook* hook = debugger::activeHook();
  if (!hook || values.size() != 5) return;
  if (hook->core().globalStep() >= 0) {
    // Loaded in the middle of a run: the hook's files already carry this run's step numbers.
    STRATA_LOG(kInfo, kInit, "checkpoint: the debugger has started; its step counters continue from ",
               hook->core().globalStep());
    return;
  }
  debugger::StepCounters c;
  c.globalStep = values[0];
  for (size_t i = 0; i < 4; ++i) c.modeSteps[i] = values[i + 1];
  hook->core().restoreCounters(c);
}


}  // namespace

std::string save(const std::string& dir, DistributedModel& model, DistributedOptimizer& optimizer, SaveOptions options) {
  profiler::ScopedSlice slice("save", profiler::phases::kCheckpoint, profiler::Track::kCheckpoint);
  const config::JobConfig& cfg = runtime::jobConfig();
  const int64_t step = options.step >= 0 ? options.step : model.steps_taken();
  const int keep = options.keep >= 0 ? options.keep : cfg.checkpoint.keep;
  const bool partial = options.partial;
  // A full checkpoint of a pipeline: rank 0 writes one by-path file, stage by stage.
  const bool fullOfPipeline = !partial && model.pp_size() > 1;
  STRATA_CHECK(!fullOfPipeline || !detail::stateByPathKind(optimizer.optimizer()).empty(), "strata::save: a full checkpoint of a ",
               model.pp_size(), "-stage pipeline keeps the optimizer state by parameter path (SGD, Adam, AdamW, ",
               "Adagrad, RMSprop); this optimizer has no such form: save with {.partial = true}");
  STRATA_CHECK(partial || !optimizer.sharded(), "strata::save: a full checkpoint of a sharded optimizer state "
               "(dataparallel.shard_optimizer_state=true) is not supported; save with {.partial = true} (every "
               "rank writes its shard of the optimizer state)");
  const int rank = world().rank();
  const std::string ckptDir = (fs::path(dir) / ck::checkpointDirName(step)).string();

  std::string error;
  if (rank == 0) {
    try {
      makeDirectories(dir);
      ck::beginCheckpoint(dir, step);
    } catch (const std::exception& e) {
      error = adapter::trimmed(e.what());
    }
  }
  adapter::agreeOrThrow(error.empty(), error, "checkpoint " + ckptDir + ": preparing the directory");

  const detail::ShardContent content =
      detail::captureLive(model, optimizer, options.sampler, step, options.epoch, partial || fullOfPipeline);
  ck::ShardRecord mine = ck::makeShardRecord(rank, model.pp_rank());
  if (fullOfPipeline) {
    mine = detail::writeFullPipelineShard(ckptDir, ck::kFullShardFile, model, content);
  } else if (partial || rank == 0) {
    try {
      ck::markWritten(mine, detail::writeShardContent(ckptDir, partial ? ck::partialShardFile(rank) : ck::kFullShardFile,
                                                      content));
    } catch (const std::exception& e) {
      ck::markFailed(mine, adapter::trimmed(e.what()));
    }
  }
  std::vector<ck::ShardRecord> records(world().size());
  world().allgather(&mine, records.data(), sizeof(ck::ShardRecord), DType::kUInt8);
  const std::string shardFailure = ck::firstFailure(records);
  STRATA_CHECK(shardFailure.empty(), "checkpoint ", ckptDir, ": writing shards ", shardFailure);

  if (rank == 0) {
    try {
      ck::ManifestHeader header;
      header.step = step;
      header.epoch = options.epoch;
      header.kind = partial ? ck::Kind::kPartial : ck::Kind::kFull;
      header.worldSize = world().size();
      header.ppSize = model.pp_size();
      header.createdUtc = ck::utcNow();
      const ck::PublishDecision d = ck::decidePublication(records, header);
      STRATA_CHECK(d.publish, d.why);
      ck::commitManifest(ckptDir, d.manifest);
      for (const auto& removed : ck::pruneCheckpoints(dir, keep))
        STRATA_LOG(kDebug, kInit, "checkpoint: pruned ", removed);
    } catch (const std::exception& e) {
      error = adapter::trimmed(e.what());
    }
  }
  adapter::agreeOrThrow(error.empty(), error, "checkpoint " + ckptDir + ": writing the manifest");
  STRATA_LOG(kInfo, kInit, "checkpoint saved: ", ckptDir, " (", partial ? "partial" : "full", ", step ", step, ")");
  return ckptDir;
}

namespace {

// `dir` itself when it is a checkpoint, else the newest complete one below it. Rank 0
// decides (it reads and hashes every shard); every rank follows.
std::string chooseCheckpoint(const std::string& dir) {
  std::string chosen, error;
  if (world().rank() == 0) {
    try {
      if (fs::exists(fs::path(dir) / ck::kManifestFile)) {
        const ck::Verdict v = ck::verifyCheckpoint(dir);
        if (v.complete) chosen = dir;
        else error = "checkpoint " + dir + " is not complete: " + v.why;
      } else if (auto found = ck::findNewestComplete(dir)) {
        chosen = found->path;
      }
    } catch (const std::exception& e) {
      error = adapter::trimmed(e.what());
    }
  }
  adapter::agreeOrThrow(error.empty(), error, "finding a checkpoint in " + dir);
  adapter::broadcastString(world(), chosen, 0);
  return chosen;
}

InputArchive readArchive(const std::string& path, uint64_t expectedBytes) {
  const std::vector<char> bytes = readWholeFile(path);
  STRATA_CHECK(bytes.size() == expectedBytes, "checkpoint shard ", path, " has ", bytes.size(),
               " bytes, its manifest says ", expectedBytes);
  InputArchive archive;
  archive.load_from(bytes.data(), bytes.size());
  return archive;
}

// Copies a shard's named tensors into the model (every rank holds the whole module).
void loadLocalTensors(InputArchive& root, DistributedModel& model, const std::string& source) {
  InputArchive local;
  root.read(detail::kLocalArchiveKey, local);
  std::map<std::string, torch::Tensor> targets;
  for (const auto& p : model.module()->named_parameters(true)) targets.emplace(p.key(), p.value());
  for (const auto& b : model.module()->named_buffers(true)) targets.emplace(b.key(), b.value());
  const std::string names = readText(local, "names");
  torch::NoGradGuard noGrad;
  size_t begin = 0;
  for (int64_t i = 0; begin < names.size(); ++i) {
    const size_t end = names.find('\n', begin);
    const std::string name = names.substr(begin, end - begin);
    begin = end + 1;
    torch::Tensor value;
    local.read("t" + std::to_string(i), value, /*is_buffer=*/true);
    auto it = targets.find(name);
    STRATA_CHECK(it != targets.end(), "checkpoint ", source, " holds \"", name, "\", which this model does not have");
    STRATA_CHECK(it->second.sizes() == value.sizes(), "checkpoint ", source, ": \"", name, "\" has shape ",
                 value.sizes(), ", the model's is ", it->second.sizes());
    it->second.copy_(value);
  }
}

// Reads "a.b.c" of a module archive: sub-archive a, then b, then the tensor c.
torch::Tensor readByPath(InputArchive& root, const std::string& path, bool isBuffer) {
  std::vector<std::string> parts;
  for (size_t begin = 0;;) {
    const size_t dot = path.find('.', begin);
    parts.push_back(path.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin));
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }
  std::vector<InputArchive> chain(parts.size());
  InputArchive* current = &root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    STRATA_CHECK(current->try_read(parts[i], chain[i]), "the model file has no \"", path, "\"");
    current = &chain[i];
  }
  torch::Tensor value;
  STRATA_CHECK(current->try_read(parts.back(), value, isBuffer), "the model file has no \"", path, "\"");
  return value;
}

// A module archive (torch::save's layout) into the model's own tensors, in place: the
// parameters keep their storage (optimizers, gradient buckets and user views hold it).
void loadModuleInPlace(InputArchive& archive, torch::nn::Module& module, const std::string& source) {
  torch::NoGradGuard noGrad;
  auto copyInto = [&](const std::string& name, torch::Tensor& target, bool isBuffer) {
    const torch::Tensor value = readByPath(archive, name, isBuffer);
    STRATA_CHECK(target.sizes() == value.sizes(), source, ": \"", name, "\" has shape ", value.sizes(),
                 ", the model's is ", target.sizes());
    target.copy_(value);
  };
  for (auto& p : module.named_parameters(true)) copyInto(p.key(), p.value(), false);
  for (auto& b : module.named_buffers(true)) copyInto(b.key(), b.value(), true);
}

struct RestoreWhat {
  bool rng = false;
  bool sampler = false;
  bool optimizer = true;  // the positional optimizer.save() archive (not a by-path checkpoint)
};

void loadState(InputArchive& root, DistributedModel& model, DistributedOptimizer& optimizer,
               const LoadOptions& options, RestoreWhat what, LoadResult* result) {
  InputArchive state;
  root.read(detail::kStateArchiveKey, state);
  if (what.optimizer) {
    InputArchive opt;
    state.read("optimizer", opt);
    optimizer.optimizer().load(opt);
  }
  const std::vector<int64_t> counters = readInt64s(state, "counters");
  STRATA_CHECK(counters.size() >= 3, "checkpoint: counters hold ", counters.size(), " values");
  result->step = counters[0];
  result->epoch = counters[1];
  model.set_steps_taken(counters[2]);
  restoreDebuggerCounters(readInt64s(state, "debugger_counters"));
  if (what.rng && options.restoreRng) {
    const int64_t saved = readInt64s(state, "rng_ranks").at(0);
    // A full checkpoint holds every rank's generator; with a different number of ranks
    // every rank takes rank 0's, as a fresh start from one seed would.
    const int64_t index = saved == world().size() ? world().rank() : 0;
    if (saved > 0) {
      torch::Tensor rng;
      state.read("rng_cpu_" + std::to_string(saved == 1 ? 0 : index), rng, /*is_buffer=*/true);
      setCpuRngState(rng.contiguous());
    }
  }
  if (what.sampler && options.sampler) {
    InputArchive samplerArchive;
    if (state.try_read("sampler", samplerArchive)) options.sampler->load(samplerArchive);
  }
}

// Shards to read on this rank, own shard last (its RNG and sampler state win).
std::vector<const ck::ShardInfo*> shardsToRead(const ck::Manifest& m, int rank) {
  std::vector<const ck::ShardInfo*> out;
  const ck::ShardInfo* own = nullptr;
  for (const auto& s : m.shards)
    if (s.rank == rank) own = &s;
  if (m.ppSize == 1) {
    // Data parallel: every shard is the whole model; one suffices.
    out.push_back(own ? own : &m.shards.front());
    return out;
  }
  for (const auto& s : m.shards)
    if (&s != own) out.push_back(&s);
  if (own) out.push_back(own);
  return out;
}

}  // namespace

std::optional<LoadResult> load(const std::string& dir, DistributedModel& model, DistributedOptimizer& optimizer,
                               LoadOptions options) {
  const std::string chosen = chooseCheckpoint(dir);
  if (chosen.empty()) return std::nullopt;
  LoadResult result;
  result.path = chosen;
  std::string error;
  ck::Manifest m;
  bool byPath = false;  // partial shards in the by-path form (any layout resumes them)
  try {
    const std::string manifestPath = (fs::path(chosen) / ck::kManifestFile).string();
    const std::vector<char> text = readWholeFile(manifestPath);
    m = ck::parseManifest(std::string(text.begin(), text.end()), manifestPath);
    result.sameLayout = m.worldSize == world().size() && m.ppSize == model.pp_size();
    // Partial shards, and the one file of a pipeline's full checkpoint, are by-path files.
    byPath = detail::TensorShardReader::isTensorShard((fs::path(chosen) / m.shards.front().file).string());
  } catch (const std::exception& e) {
    error = adapter::trimmed(e.what());
  }
  adapter::agreeOrThrow(error.empty(), error, "loading checkpoint " + chosen);
  std::unique_ptr<detail::ByPathCheckpoint> shards;
  if (byPath) shards = std::make_unique<detail::ByPathCheckpoint>(chosen, m, model);  // collective
  try {
    const int rank = world().rank();
    if (shards) {
      shards->restoreTensors(model);
      shards->restoreOptimizer(model, optimizer, result.sameLayout);
      bool own = false;
      InputArchive state = shards->stateArchive(&own);
      loadState(state, model, optimizer, options, {true, own && result.sameLayout, false}, &result);
    } else if (m.kind == ck::Kind::kFull) {
      STRATA_CHECK(!optimizer.sharded(), "checkpoint ", chosen, " is a full checkpoint (positional optimizer state); "
                   "a sharded optimizer (dataparallel.shard_optimizer_state=true) resumes partial checkpoints only");
      const ck::ShardInfo& shard = m.shards.front();
      InputArchive archive = readArchive((fs::path(chosen) / shard.file).string(), shard.bytes);
      loadModuleInPlace(archive, *model.module(), shard.file);
      loadState(archive, model, optimizer, options, {true, result.sameLayout}, &result);
    } else {  // partial shards of an older build: named tensors and positional optimizer state
      for (const ck::ShardInfo* shard : shardsToRead(m, rank)) {
        const std::string path = (fs::path(chosen) / shard->file).string();
        InputArchive archive = readArchive(path, shard->bytes);
        loadLocalTensors(archive, model, path);
        const bool own = shard->rank == rank;
        loadState(archive, model, optimizer, options, {own || m.ppSize == 1, own && result.sameLayout}, &result);
      }
    }
    if (!result.sameLayout)
      STRATA_LOG(kWarn, kInit, "checkpoint ", chosen, " was taken with ", m.worldSize, " rank(s) and ", m.ppSize,
                 " pipeline stage(s); now ", world().size(), " and ", model.pp_size(),
                 ": model and optimizer restored, the sampler starts its epoch from the beginning");
  } catch (const std::exception& e) {
    error = adapter::trimmed(e.what());
  }
  adapter::agreeOrThrow(error.empty(), error, "loading checkpoint " + chosen);
  STRATA_LOG(kInfo, kInit, "checkpoint loaded: ", chosen, " (step ", result.step, ", epoch ", result.epoch, ")");
  return result;
}

void load_module(const std::string& path, torch::nn::Module& module) {
  InputArchive archive;
  archive.load_from(path);
  loadModuleInPlace(archive, module, path);
}

}  // namespace strata
