#include "adapter/checkpoint/checkpoint_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "adapter/ops/unique_tensors.h"
#include "adapter/checkpoint/tensor_shard.h"
#include "checkpoint/publication.h"
#include "checkpoint/writer.h"
#include "core/errors.h"
#include "debugger/torch_hook.h"
#include "strata/runtime.h"

namespace strata::detail {
namespace {

namespace ck = strata::checkpoint;

torch::Tensor int64Tensor(const std::vector<int64_t>& values) {
  return torch::tensor(at::ArrayRef<int64_t>(values), torch::kInt64);
}

torch::Tensor cpuRngState() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
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

// The debugger hook's counters as [global, train, eval, predict, global-mode].
std::vector<int64_t> debuggerCounters() {
  debugger::StepCounters c;
  if (debugger::TorchHook* hook = debugger::activeHook()) c = hook->core().counters();
  std::vector<int64_t> out{c.globalStep};
  out.insert(out.end(), c.modeSteps.begin(), c.modeSteps.end());
  return out;
}

// Strata's own state: the optimizer (unless a partial shard holds it by path), counters,
// RNG, sampler.
void writeState(OutputArchive& root, const ShardContent& c) {
  OutputArchive state;
  if (!c.partial || c.optimizerKind.empty()) {
    OutputArchive opt;
    c.writeOptimizer(opt);
    state.write("optimizer", opt);
  }
  state.write("counters", int64Tensor(c.counters), /*is_buffer=*/true);
  state.write("debugger_counters", int64Tensor(c.debuggerCounters), /*is_buffer=*/true);
  state.write("rng_ranks", int64Tensor({static_cast<int64_t>(c.rngStates.size())}), /*is_buffer=*/true);
  for (size_t r = 0; r < c.rngStates.size(); ++r)
    state.write("rng_cpu_" + std::to_string(r), c.rngStates[r], /*is_buffer=*/true);
  if (c.sampler) state.write("sampler", *c.sampler);
  root.write(kStateArchiveKey, state);
}

// A partial shard as a by-path file: this rank's tensors, its optimizer entries, then
// Strata's state (an archive in the layout of a full checkpoint's "strata_state").
void writeByPath(TensorShardWriter& writer, const ShardContent& c) {
  writeTensorsByPath(writer, c);
  finishByPath(writer, c);
}

using ModuleTree = StateSnapshot::ModuleTree;

ModuleTree buildTree(const torch::nn::Module& module, std::vector<torch::Tensor>& tensors) {
  ModuleTree tree;
  for (const auto& p : module.named_parameters(/*recurse=*/false)) {
    tree.leaves.push_back({p.key(), tensors.size(), false, p.value().requires_grad()});
    tensors.push_back(p.value());
  }
  for (const auto& b : module.named_buffers(/*recurse=*/false)) {
    tree.leaves.push_back({b.key(), tensors.size(), true, b.value().requires_grad()});
    tensors.push_back(b.value());
  }
  for (const auto& child : module.named_children())
    if (child.value()->is_serializable()) tree.children.emplace_back(child.key(), buildTree(*child.value(), tensors));
  return tree;
}

// What Module::save writes, with the snapshot's copies in place of the module's tensors.
void writeTree(OutputArchive& archive, const ModuleTree& tree, const std::vector<torch::Tensor>& tensors) {
  for (const auto& leaf : tree.leaves) {
    torch::Tensor t = tensors[leaf.index];
    // A parameter's requires_grad flag is part of the archive; the copy shares the storage.
    if (t.defined() && leaf.requiresGrad) t = t.detach().requires_grad_(true);
    archive.write(leaf.name, t, leaf.isBuffer);
  }
  for (const auto& child : tree.children) {
    OutputArchive sub(archive.compilation_unit());
    writeTree(sub, child.second, tensors);
    archive.write(child.first, sub);
  }
}

}  // namespace

void writeTensorsByPath(TensorShardWriter& writer, const ShardContent& c) {
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    if (c.aliasOf[i] < 0) {
      writer.addTensor(c.names[i], c.tensors[i], c.isBuffer[i]);
      continue;
    }
    ck::TensorEntry alias = describeTensor(c.names[i], c.tensors[i], c.isBuffer[i]);
    alias.aliasOf = c.names[static_cast<size_t>(c.aliasOf[i])];
    writer.addAlias(alias);
  }
  if (!c.optimizerKind.empty())
    c.forEachOptimizerEntry([&](const std::string& path, const std::string& bytes) {
      writer.addOptimizerState(c.optimizerKind, path, bytes);
    });
}

void finishByPath(TensorShardWriter& writer, const ShardContent& c) {
  OutputArchive root;
  writeState(root, c);
  writer.addState(archiveBytes(root));
  writer.finish();
}

ShardContent captureLive(DistributedModel& model, DistributedOptimizer& optimizer, DistributedSampler* sampler,
                         int64_t step, int64_t epoch, bool partial) {
  ShardContent c;
  c.partial = partial;
  torch::optim::Optimizer* opt = &optimizer.state_optimizer();  // lives until the next step
  if (partial) {
    std::set<adapter::TensorKey> parameters;
    for (const auto& p : model.local_parameters()) parameters.insert(adapter::tensorKey(p));
    std::map<adapter::TensorKey, int> firstOf;  // storage -> index of its first path
    std::vector<std::pair<std::string, torch::Tensor>> named;
    for (const auto& item : model.local_state_dict()) {
      const torch::Tensor t = item.value().detach();
      const adapter::TensorKey key = adapter::tensorKey(t);
      auto [first, inserted] = firstOf.emplace(key, static_cast<int>(c.names.size()));
      c.names.push_back(item.key());
      c.tensors.push_back(t);
      c.aliasOf.push_back(inserted ? -1 : first->second);
      c.isBuffer.push_back(parameters.count(key) == 0);
      named.emplace_back(item.key(), item.value());
    }
    c.optimizerKind = stateByPathKind(*opt);
    if (!c.optimizerKind.empty()) {
      c.optimizerSlots = slotsByPath(*opt, named);
      c.forEachOptimizerEntry = [opt, slots = c.optimizerSlots](const EmitEntry& emit) {
        forEachEntry(*opt, slots, emit);
      };
    }
  } else {
    std::shared_ptr<torch::nn::Module> module = model.module();
    c.writeModule = [module](OutputArchive& archive) { module->save(archive); };
  }
  c.writeOptimizer = [opt](OutputArchive& archive) { opt->save(archive); };
  c.counters = {step, epoch, model.steps_taken(), world().size(), model.pp_size()};
  c.debuggerCounters = debuggerCounters();
  c.rngStates = partial ? std::vector<torch::Tensor>{cpuRngState()} : gatherRngStates();
  if (sampler) {
    c.sampler = std::make_shared<OutputArchive>();
    sampler->save(*c.sampler);
  }
  return c;
}

ck::ShardInfo writeShardContent(const std::string& dir, const std::string& file, const ShardContent& content,
                                const WriteProgress& progress) {
  if (content.partial) {
    return ck::writeShard(dir, file, [&content, &progress](const ck::ByteSink& sink) {
      uint64_t written = 0;
      TensorShardWriter writer([&](const void* data, size_t size) {
        sink(data, size);
        written += size;
        if (progress) progress(written);
      });
      writeByPath(writer, content);
    });
  }
  OutputArchive root;
  content.writeModule(root);  // the top level torch::load(module, path) reads
  writeState(root, content);
  return ck::writeShard(dir, file, [&root, &progress](const ck::ByteSink& sink) {
    uint64_t written = 0;
    root.save_to([&](const void* data, size_t size) -> size_t {
      sink(data, size);
      written += size;
      if (progress) progress(written);
      return size;
    });
  });
}

bool StateSnapshot::supports(DistributedOptimizer& optimizer) {
  return OptimizerSnapshot::supports(optimizer.optimizer());
}

ShardContent StateSnapshot::take(const ShardContent& live, DistributedModel& model, DistributedOptimizer& optimizer) {
  ShardContent out = live;  // counters, generator states and the sampler's archive are already copies
  std::vector<torch::Tensor> liveTensors;
  if (live.partial) {
    liveTensors = live.tensors;
  } else {
    tree_ = buildTree(*model.module(), liveTensors);
  }
  buffers_.resize(liveTensors.size());
  for (size_t i = 0; i < liveTensors.size(); ++i) {
    if (live.partial && live.aliasOf[i] >= 0) {
      buffers_[i] = torch::Tensor();  // an alias: its target's copy serves
      continue;
    }
    copyIntoReused(buffers_[i], liveTensors[i]);
  }
  if (live.partial) {
    out.tensors = buffers_;
    for (size_t i = 0; i < out.tensors.size(); ++i)
      if (live.aliasOf[i] >= 0) out.tensors[i] = buffers_[static_cast<size_t>(live.aliasOf[i])];
  } else {
    out.writeModule = [this](OutputArchive& archive) { writeTree(archive, tree_, buffers_); };
  }
  optimizer_.take(optimizer.state_optimizer());
  out.writeOptimizer = [this](OutputArchive& archive) { optimizer_.write(archive); };
  if (!live.optimizerKind.empty())
    out.forEachOptimizerEntry = [this, slots = live.optimizerSlots](const EmitEntry& emit) {
      optimizer_.forEachEntry(slots, emit);
    };
  return out;
}

uint64_t StateSnapshot::bytes() const {
  uint64_t total = optimizer_.bytes();
  for (const auto& t : buffers_)
    if (t.defined()) total += static_cast<uint64_t>(t.nbytes());
  return total;
}

}  // namespace strata::detail
