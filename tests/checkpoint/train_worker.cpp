// A tiny data-parallel training job for the checkpoint process tests: a small MLP with
// dropout (the generator's state matters) and Adam (the optimizer has state), trained on a
// fixed synthetic data set through a DistributedSampler, with a CheckpointManager.
//
//   train_worker --run-dir D --steps N [--every K] [--resume] [--partial] [--sleep-ms S]
//                [--sigterm-at-step K --sigterm-rank R] [--pp 2] [--async] [--bad-config]
//                [--hold-write-at-step K] [--start-gate FILE]
//
// --bad-config: an unknown key in the job config (the exit-status tests' config error).
// --pp 2: model parallel, a 2-stage pipeline (2 microbatches) instead of data parallel.
// --async: checkpoints written in the background ("checkpoint": {"async": true}).
// --hold-write-at-step K: the background write of step K stops mid-shard (after creating
//   D/held/rank-<r>) until D/release exists AND a save of the training thread is waiting for
//   it, so a signal sent between the two arrives while the write is in flight.
// --start-gate FILE: every rank waits for FILE before its first step (the test prepares
//   the checkpoint directory meanwhile).
//
// Rank 0 prints "stats: saves=<n> background=<n> waited=<n>" at the end.
//
// Rank 0 prints "resumed step=<k> params_sha256=<hex>" after a resume, "saved step=<k>
// params_sha256=<hex>" after each checkpoint, and "final: step=<n> params_sha256=<hex>".
// Every rank writes its pid to D/pids/rank-<r>.pid (the fault injector's targets). Exits
// with CheckpointManager::exit_code() (strata::kExitStopped after SIGTERM), or
// strata::exit_code_for(the error) (78 for a config error).
#include <torch/torch.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "adapter/checkpoint/checkpoint_async.h"
#include "checkpoint/sha256.h"
#include "strata/checkpoint.h"
#include "strata/strata.h"
#include "testing/e2e_training.h"

namespace {

struct Flags {
  std::string runDir;
  int64_t steps = 20;
  int64_t every = 0;
  bool resume = false;
  bool partial = false;
  int sleepMs = 0;
  int64_t sigtermAtStep = -1;
  int sigtermRank = 0;
  int64_t batch = 8;  // per data-parallel rank
  int pp = 1;
  bool async = false;
  int64_t holdWriteAtStep = -1;
  std::string startGate;
  bool badConfig = false;
};

constexpr int64_t kSamples = 96;

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (a == "--run-dir") f.runDir = next();
    else if (a == "--steps") f.steps = std::stoll(next());
    else if (a == "--every") f.every = std::stoll(next());
    else if (a == "--resume") f.resume = true;
    else if (a == "--partial") f.partial = true;
    else if (a == "--sleep-ms") f.sleepMs = std::stoi(next());
    else if (a == "--sigterm-at-step") f.sigtermAtStep = std::stoll(next());
    else if (a == "--sigterm-rank") f.sigtermRank = std::stoi(next());
    else if (a == "--batch") f.batch = std::stoll(next());
    else if (a == "--pp") f.pp = std::stoi(next());
    else if (a == "--async") f.async = true;
    else if (a == "--hold-write-at-step") f.holdWriteAtStep = std::stoll(next());
    else if (a == "--start-gate") f.startGate = next();
    else if (a == "--bad-config") f.badConfig = true;
  }
  return f;
}

std::string paramsSha256(torch::nn::Module& net) {
  strata::checkpoint::Sha256 sha;
  for (const auto& p : net.named_parameters(true)) {
    const torch::Tensor t = p.value().detach().contiguous();
    sha.update(p.key().data(), p.key().size());
    sha.update(t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
  }
  return sha.hexDigest();
}

// Data parallel: every rank holds the whole model. A pipeline rank's copy is current only for
// its own stages: every tensor's digest comes from the rank that owns it (the others give
// zeros, and a max-allreduce keeps the owner's), so the hash does not depend on the partition.
std::string stateSha256(strata::DistributedModel& model, torch::nn::Module& net) {
  if (model.pp_size() == 1) return paramsSha256(net);
  const auto local = model.local_state_dict();
  std::vector<std::pair<std::string, torch::Tensor>> all;
  for (const auto& p : net.named_parameters(true)) all.emplace_back(p.key(), p.value());
  for (const auto& b : net.named_buffers(true)) all.emplace_back(b.key(), b.value());
  constexpr size_t kHex = 64;
  std::string digests(kHex * all.size(), '\0');
  for (size_t i = 0; i < all.size(); ++i) {
    if (!local.contains(all[i].first)) continue;
    const torch::Tensor t = all[i].second.detach().contiguous();
    const std::string d = strata::checkpoint::sha256Hex(t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
    digests.replace(i * kHex, kHex, d);
  }
  strata::world().allreduce(digests.data(), digests.data(), digests.size(), strata::DType::kUInt8, strata::ReduceOp::kMax);
  return strata::checkpoint::sha256Hex(digests.data(), digests.size());
}

std::string configJson(const Flags& f) {
  return std::string("{\"output_dir\": \"") + f.runDir + "\", \"checkpoint\": {\"dir\": \"" + f.runDir +
         "/ckpt\", \"every_steps\": " + std::to_string(f.every) + ", \"resume\": " + (f.resume ? "true" : "false") +
         ", \"keep\": 2, \"async\": " + (f.async ? "true" : "false") +
         "}, \"profiler\": {\"disable_profiler\": true}" +
         (f.pp > 1 ? ", \"modelparallel\": {\"enabled\": true, \"partitions\": " + std::to_string(f.pp) +
                         ", \"microbatches\": 2}"
                   : std::string()) +
         (f.badConfig ? ", \"chekpoint\": {}" : "") + "}";
}

// Waits (bounded, so a broken test cannot hang the worker) until `ready` holds.
void waitUntil(const std::function<bool()>& ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!ready() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

void holdBackgroundWrite(const Flags& f, strata::CheckpointManager& ckpt) {
  const std::string heldDir = f.runDir + "/held";
  std::filesystem::create_directories(heldDir);
  auto held = std::make_shared<std::atomic<bool>>(false);
  strata::detail::TEST_setBackgroundWriteHook([f, &ckpt, heldDir, held](int64_t step, int rank, uint64_t) {
    if (step != f.holdWriteAtStep || held->exchange(true)) return;
    std::ofstream(heldDir + "/rank-" + std::to_string(rank)) << step << "\n";
    waitUntil([&] { return std::filesystem::exists(f.runDir + "/release") && ckpt.stats().waiting; });
  });
}

void writePid(const Flags& f) {
  std::filesystem::create_directories(f.runDir + "/pids");
  std::ofstream(f.runDir + "/pids/rank-" + std::to_string(strata::rank()) + ".pid") << getpid() << "\n";
}

int train(const Flags& f) {
  torch::manual_seed(1234);  // the data set: the same on every rank and in every attempt
  const torch::Tensor x = torch::randn({kSamples, 8});
  const torch::Tensor y = torch::randint(0, 4, {kSamples}, torch::kInt64);
  torch::manual_seed(7);
  namespace nn = torch::nn;
  auto net = nn::Sequential(nn::Linear(8, 32), nn::ReLU(), nn::Dropout(0.25), nn::Linear(32, 4), nn::LogSoftmax(1));
  strata::DistributedModel model(net);
  strata::DistributedOptimizer opt(torch::optim::Adam(model.parameters(), torch::optim::AdamOptions(0.01)), model);
  strata::DistributedSampler::Options so;
  so.seed = 3;
  so.dropLast = true;
  strata::DistributedSampler sampler(kSamples, so);
  strata::CheckpointOptions co;
  co.partial = f.partial ? 1 : -1;  // -1: partial for a pipeline, full otherwise
  strata::CheckpointManager ckpt(model, opt, &sampler, co);
  if (f.holdWriteAtStep >= 0) holdBackgroundWrite(f, ckpt);
  if (!f.startGate.empty()) waitUntil([&] { return std::filesystem::exists(f.startGate); });
  int64_t step = ckpt.resume();
  int64_t epoch = ckpt.epoch();
  if (step > 0) {
    const std::string hash = stateSha256(model, *net);
    if (strata::rank() == 0) std::printf("resumed step=%lld params_sha256=%s\n", (long long)step, hash.c_str());
  }
  // A resumed sampler continues where the checkpoint left it; a fresh one starts its epoch,
  // as a DataLoader's reset() does.
  bool needReset = step == 0;
  while (step < f.steps) {
    if (needReset) sampler.reset();
    needReset = false;
    auto indices = sampler.next(static_cast<size_t>(f.batch));
    if (!indices || static_cast<int64_t>(indices->size()) < f.batch) {
      needReset = true;
      ++epoch;
      continue;
    }
    const torch::Tensor idx = torch::tensor(std::vector<int64_t>(indices->begin(), indices->end()), torch::kInt64);
    strata::testing::trainStep(model, opt, x.index_select(0, idx), y.index_select(0, idx),
                               strata::testing::Loss::kNll);
    ++step;
    if (f.sleepMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(f.sleepMs));
    if (step == f.sigtermAtStep && strata::rank() == f.sigtermRank) std::raise(SIGTERM);
    const std::string before = ckpt.last_saved();
    const bool stop = ckpt.after_step(step, epoch);
    if (ckpt.last_saved() != before) {  // every rank saved (collective): hash collectively too
      const std::string hash = stateSha256(model, *net);
      if (strata::rank() == 0) std::printf("saved step=%lld params_sha256=%s\n", (long long)step, hash.c_str());
    }
    std::fflush(stdout);
    if (stop) break;
  }
  const std::string hash = stateSha256(model, *net);
  if (strata::rank() == 0) std::printf("final: step=%lld params_sha256=%s\n", (long long)step, hash.c_str());
  const int code = ckpt.exit_code();  // waits for a write still in flight
  const strata::CheckpointStats stats = ckpt.stats();
  if (strata::rank() == 0)
    std::printf("stats: saves=%lld background=%lld waited=%lld\n", (long long)stats.saves,
                (long long)stats.backgroundSaves, (long long)stats.waitedSaves);
  strata::detail::TEST_setBackgroundWriteHook(nullptr);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags f = parse(argc, argv);
  try {
    strata::InitOptions io;
    io.configJson = configJson(f);
    strata::init(io);
    writePid(f);
    const int code = train(f);
    strata::finalize();
    return code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_worker: %s\n", e.what());
    return strata::exit_code_for(e);
  }
}
