// strata::save / strata::load / CheckpointManager: the libtorch side of checkpoints. The
// torch-free core (src/checkpoint/) owns the on-disk protocol; this file turns the training
// state into archives and runs the collective steps (see checkpoint/writer.h for the order).
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
#include <mutex>

#include "core/atomic_file.h"
#include "checkpoint/catalog.h"
#include "checkpoint/writer.h"
#include "core/errors.h"
#include "core/logging.h"
#include "debugger/torch_hook.h"
#include "profiler/session.h"
#include "runtime/runtime_internal.h"
#include "runtime/signals.h"
#include "runtime/stop.h"
#include "strata/runtime.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
namespace ck = strata::checkpoint;
using torch::serialize::InputArchive;
using torch::serialize::OutputArchive;

// Sub-archive names. Module::load reads only the module's own keys, so a full checkpoint's
// extra state never disturbs torch::load(module, path).
constexpr const char* kStateKey = "strata_state";
constexpr const char* kLocalKey = "strata_local";

// What every rank reports after writing its part: gathered so that all ranks agree on
// success, and a failure names the rank and its error.
struct ShardRecord {
  int32_t ok = 1;
  int32_t wrote = 0;
  int32_t rank = 0;
  int32_t ppRank = 0;
  uint64_t bytes = 0;
  char sha256[64] = {};
  char error[184] = {};
};
static_assert(sizeof(ShardRecord) == 272, "fixed-size record for allgather");

std::vector<ShardRecord> gatherRecords(const ShardRecord& mine) {
  std::vector<ShardRecord> all(world().size());
  world().allgather(&mine, all.data(), sizeof(ShardRecord), DType::kUInt8);
  return all;
}

void copyText(char* out, size_t capacity, const std::string& text) {
  std::memset(out, 0, capacity);
  std::memcpy(out, text.data(), std::min(capacity - 1, text.size()));
}

// Throws on every rank when any rank failed, naming the first failure.
void checkAllOk(const std::vector<ShardRecord>& records, const std::string& what) {
  for (size_t r = 0; r < records.size(); ++r)
    STRATA_CHECK(records[r].ok, what, " failed on rank ", r, ": ",
                 std::string(records[r].error, strnlen(records[r].error, sizeof(records[r].error))));
}

// Agrees on one flag (and the failure text of the lowest failing rank) across the world.
void agreeOrThrow(bool ok, const std::string& error, const std::string& what) {
  ShardRecord mine;
  mine.ok = ok ? 1 : 0;
  mine.rank = world().rank();
  copyText(mine.error, sizeof(mine.error), error);
  checkAllOk(gatherRecords(mine), what);
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

torch::Tensor cpuRngState() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void setCpuRngState(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

torch::Tensor int64Tensor(const std::vector<int64_t>& values) {
  return torch::tensor(at::ArrayRef<int64_t>(values), torch::kInt64);
}

std::vector<int64_t> readInt64s(InputArchive& archive, const std::string& key) {
  torch::Tensor t;
  archive.read(key, t, /*is_buffer=*/true);
  t = t.contiguous().to(torch::kInt64);
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

torch::Tensor textTensor(const std::string& text) {
  torch::Tensor t = torch::empty({static_cast<int64_t>(text.size())}, torch::kUInt8);
  if (!text.empty()) std::memcpy(t.data_ptr(), text.data(), text.size());
  return t;
}

std::string readText(InputArchive& archive, const std::string& key) {
  torch::Tensor t;
  archive.read(key, t, /*is_buffer=*/true);
  t = t.contiguous();
  return std::string(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()));
}

// The debugger hook's counters as [global, train, eval, predict, global-mode].
std::vector<int64_t> debuggerCounters() {
  debugger::StepCounters c;
  if (debugger::TorchHook* hook = debugger::activeHook()) c = hook->core().counters();
  std::vector<int64_t> out{c.globalStep};
  out.insert(out.end(), c.modeSteps.begin(), c.modeSteps.end());
  return out;
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

struct StateToSave {
  int64_t step = 0;
  int64_t epoch = 0;
  std::vector<torch::Tensor> rngStates;  // full: every rank's; partial: this rank's
};

// Strata's own state: optimizer, counters, RNG, sampler.
void writeState(OutputArchive& root, DistributedModel& model, DistributedOptimizer& optimizer,
                DistributedSampler* sampler, const StateToSave& s) {
  OutputArchive state;
  OutputArchive opt;
  optimizer.optimizer().save(opt);
  state.write("optimizer", opt);
  state.write("counters", int64Tensor({s.step, s.epoch, model.steps_taken(), world().size(), model.pp_size()}),
              /*is_buffer=*/true);
  state.write("debugger_counters", int64Tensor(debuggerCounters()), /*is_buffer=*/true);
  state.write("rng_ranks", int64Tensor({static_cast<int64_t>(s.rngStates.size())}), /*is_buffer=*/true);
  for (size_t r = 0; r < s.rngStates.size(); ++r)
    state.write("rng_cpu_" + std::to_string(r), s.rngStates[r], /*is_buffer=*/true);
  if (sampler) {
    OutputArchive samplerArchive;
    sampler->save(samplerArchive);
    state.write("sampler", samplerArchive);
  }
  root.write(kStateKey, state);
}

// This rank's parameters and buffers by their path in the model (a pipeline stage's own).
void writeLocalTensors(OutputArchive& root, DistributedModel& model) {
  OutputArchive local;
  std::string names;
  int64_t i = 0;
  for (const auto& item : model.local_state_dict()) {
    names += item.key() + "\n";
    local.write("t" + std::to_string(i++), item.value().detach(), /*is_buffer=*/true);
  }
  local.write("names", textTensor(names), /*is_buffer=*/true);
  root.write(kLocalKey, local);
}

ck::ShardInfo writeArchive(const std::string& ckptDir, const std::string& file, OutputArchive& archive) {
  return ck::writeShard(ckptDir, file, [&archive](const ck::ByteSink& sink) {
    archive.save_to([&sink](const void* data, size_t size) -> size_t {
      sink(data, size);
      return size;
    });
  });
}

std::vector<torch::Tensor> gatherRngStates() {
  const torch::Tensor mine = cpuRngState().contiguous();
  int64_t sizes[2] = {mine.numel(), -mine.numel()};
  world().allreduce(sizes, sizes, 2, DType::kInt64, ReduceOp::kMax);
  STRATA_CHECK(sizes[0] == -sizes[1], "checkpoint: ranks disagree on the CPU generator's state size");
  torch::Tensor all = torch::empty({world().size(), mine.numel()}, torch::kUInt8);
  world().allgather(mine.data_ptr(), all.data_ptr(), static_cast<size_t>(mine.numel()), DType::kUInt8);
  std::vector<torch::Tensor> out;
  for (int r = 0; r < world().size(); ++r) out.push_back(all[r].clone());
  return out;
}

// Rank 0's string on every rank.
std::string broadcastString(std::string text) {
  int64_t length = static_cast<int64_t>(text.size());
  world().broadcast(&length, 1, DType::kInt64, 0);
  text.resize(static_cast<size_t>(length));
  if (length > 0) world().broadcast(text.data(), static_cast<size_t>(length), DType::kUInt8, 0);
  return text;
}

}  // namespace

std::string save(const std::string& dir, DistributedModel& model, DistributedOptimizer& optimizer, SaveOptions options) {
  profiler::ScopedSlice slice("save", profiler::phases::kCheckpoint, profiler::Track::kCheckpoint);
  const config::JobConfig& cfg = runtime::jobConfig();
  const int64_t step = options.step >= 0 ? options.step : model.steps_taken();
  const int keep = options.keep >= 0 ? options.keep : cfg.checkpoint.keep;
  const bool partial = options.partial;
  STRATA_CHECK(partial || model.pp_size() == 1, "strata::save: a full checkpoint of a ", model.pp_size(),
               "-stage pipeline is not supported; save with {.partial = true} (every stage writes its shard)");
  const int rank = world().rank();
  const std::string ckptDir = (fs::path(dir) / ck::checkpointDirName(step)).string();

  std::string error;
  if (rank == 0) {
    try {
      makeDirectories(dir);
      ck::beginCheckpoint(dir, step);
    } catch (const std::exception& e) {
      error = trimmed(e.what());
    }
  }
  agreeOrThrow(error.empty(), error, "checkpoint " + ckptDir + ": preparing the directory");

  StateToSave state;
  state.step = step;
  state.epoch = options.epoch;
  state.rngStates = partial ? std::vector<torch::Tensor>{cpuRngState()} : gatherRngStates();
  ShardRecord mine;
  mine.rank = rank;
  mine.ppRank = model.pp_rank();
  if (partial || rank == 0) {
    try {
      OutputArchive archive;
      if (partial) {
        writeLocalTensors(archive, model);
      } else {
        model.module()->save(archive);  // the top level torch::load(module, path) reads
      }
      writeState(archive, model, optimizer, options.sampler, state);
      const ck::ShardInfo info = writeArchive(ckptDir, partial ? ck::partialShardFile(rank) : ck::kFullShardFile, archive);
      mine.wrote = 1;
      mine.bytes = info.bytes;
      std::memcpy(mine.sha256, info.sha256.data(), sizeof(mine.sha256));
    } catch (const std::exception& e) {
      mine.ok = 0;
      copyText(mine.error, sizeof(mine.error), trimmed(e.what()));
    }
  }
  const std::vector<ShardRecord> records = gatherRecords(mine);
  checkAllOk(records, "checkpoint " + ckptDir + ": writing shards");

  if (rank == 0) {
    try {
      ck::Manifest m;
      m.step = step;
      m.epoch = options.epoch;
      m.kind = partial ? ck::Kind::kPartial : ck::Kind::kFull;
      m.worldSize = world().size();
      m.ppSize = model.pp_size();
      m.dpSize = m.worldSize / m.ppSize;
      m.createdUtc = ck::utcNow();
      for (const ShardRecord& r : records) {
        if (!r.wrote) continue;
        m.shards.push_back({partial ? ck::partialShardFile(r.rank) : ck::kFullShardFile, r.rank, r.ppRank, r.bytes,
                            std::string(r.sha256, sizeof(r.sha256))});
      }
      ck::commitManifest(ckptDir, m);
      for (const auto& removed : ck::pruneCheckpoints(dir, keep))
        STRATA_LOG(kDebug, kInit, "checkpoint: pruned ", removed);
    } catch (const std::exception& e) {
      error = trimmed(e.what());
    }
  }
  agreeOrThrow(error.empty(), error, "checkpoint " + ckptDir + ": writing the manifest");
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
      error = trimmed(e.what());
    }
  }
  agreeOrThrow(error.empty(), error, "finding a checkpoint in " + dir);
  return broadcastString(chosen);
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
  root.read(kLocalKey, local);
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
};

void loadState(InputArchive& root, DistributedModel& model, DistributedOptimizer& optimizer,
               const LoadOptions& options, RestoreWhat what, LoadResult* result) {
  InputArchive state;
  root.read(kStateKey, state);
  InputArchive opt;
  state.read("optimizer", opt);
  optimizer.optimizer().load(opt);
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
  try {
    const std::string manifestPath = (fs::path(chosen) / ck::kManifestFile).string();
    const std::vector<char> text = readWholeFile(manifestPath);
    const ck::Manifest m = ck::parseManifest(std::string(text.begin(), text.end()), manifestPath);
    result.sameLayout = m.worldSize == world().size() && m.ppSize == model.pp_size();
    const int rank = world().rank();
    if (m.kind == ck::Kind::kFull) {
      const ck::ShardInfo& shard = m.shards.front();
      InputArchive archive = readArchive((fs::path(chosen) / shard.file).string(), shard.bytes);
      loadModuleInPlace(archive, *model.module(), shard.file);
      loadState(archive, model, optimizer, options, {true, result.sameLayout}, &result);
    } else {
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
    error = trimmed(e.what());
  }
  agreeOrThrow(error.empty(), error, "loading checkpoint " + chosen);
  STRATA_LOG(kInfo, kInit, "checkpoint loaded: ", chosen, " (step ", result.step, ", epoch ", result.epoch, ")");
  return result;
}

void load_module(const std::string& path, torch::nn::Module& module) {
  InputArchive archive;
  archive.load_from(path);
  loadModuleInPlace(archive, module, path);
}

CheckpointManager::CheckpointManager(DistributedModel& model, DistributedOptimizer& optimizer,
                                     DistributedSampler* sampler, CheckpointOptions options)
    : model_(model), optimizer_(optimizer), sampler_(sampler), options_(std::move(options)) {
  const config::CheckpointConfig& cfg = runtime::jobConfig().checkpoint;
  if (options_.dir.empty()) options_.dir = cfg.dir;
  if (options_.everySteps < 0) options_.everySteps = cfg.everySteps;
  if (options_.resume < 0) options_.resume = cfg.resume ? 1 : 0;
  if (options_.keep < 0) options_.keep = cfg.keep;
  if (options_.partial < 0) options_.partial = model.pp_size() > 1 || model.model_parallel() ? 1 : 0;
  runtime::installStopSignalHandlers();
}

int64_t CheckpointManager::resume() {
  if (!options_.resume) return 0;
  LoadOptions lo;
  lo.sampler = sampler_;
  const std::optional<LoadResult> r = load(options_.dir, model_, optimizer_, lo);
  if (!r) {
    STRATA_LOG(kInfo, kInit, "checkpoint: nothing to resume in ", options_.dir, "; starting from step 0");
    return 0;
  }
  epoch_ = r->epoch;
  lastSavedStep_ = r->step;
  return r->step;
}

bool CheckpointManager::after_step(int64_t stepsDone, int64_t epoch) {
  const bool due = options_.everySteps > 0 && stepsDone % options_.everySteps == 0;
  const bool stop = should_stop();
  if (stop) {
    // Did a signal (on any rank) ask? Then the process exits with kExitStopped.
    int32_t signal = runtime::localStopCause() == runtime::StopCause::kSignal ? 1 : 0;
    if (size() > 1) world().allreduce(&signal, &signal, 1, DType::kInt32, ReduceOp::kMax);
    stoppedBySignal_ = signal != 0;
  }
  if ((due || stop) && stepsDone != lastSavedStep_) save(stepsDone, epoch);
  return stop;
}

std::string CheckpointManager::save(int64_t stepsDone, int64_t epoch) {
  SaveOptions so;
  so.partial = options_.partial != 0;
  so.step = stepsDone;
  so.epoch = epoch;
  so.sampler = sampler_;
  so.keep = options_.keep;
  lastSaved_ = strata::save(options_.dir, model_, optimizer_, so);
  lastSavedStep_ = stepsDone;
  return lastSaved_;
}

}  // namespace strata
