// Checkpoints of about 1 GB of training state: write and read throughput against the raw
// speed of the same disk (measured in the same run), and the training stall per save of a
// synchronous checkpoint against an asynchronous one (issue 17: async stall <= 10% of sync).
//
//   build/bench/checkpoint_bench [--dir DIR] [--mb 512] [--repeats 3] [--part all|throughput|stall]
//
// The state: a stack of Linear layers holding --mb MB of float32 parameters, plus SGD
// momentum buffers of the same size (one training step creates them): 2 x --mb MB in all.
//
// Throughput. "write": strata::save (full checkpoint: serialise, SHA-256, write, fsync,
// rename, fsync dir, manifest). "read": strata::load of the root (the finder re-hashes the
// shard to verify it, then the archive is read and copied into the model), with the file's
// pages dropped from the page cache first (posix_fadvise DONTNEED after fsync), so reads come
// from the disk. Raw: a dd-like 4 MiB-block write + fsync of the same byte count, a cold read.
//
// Stall. CheckpointManager::save() as the training loop calls it, timed on the training
// thread: synchronous (the whole write) and asynchronous (waiting for a previous write, none
// here since each save starts after the previous one was published, plus the copy into the
// reused snapshot buffers). The first asynchronous save also allocates those buffers and is
// reported apart. "publish": from the asynchronous save's return until its checkpoint is
// complete. "compute step": a fixed matmul timed with no write going on, and while an
// asynchronous write is in flight (what the background thread costs the training).
//
// Medians over --repeats. Ends with `# <metric>: <value>` lines.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "strata/checkpoint.h"
#include "strata/strata.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void dropFromCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

void dropTreeFromCache(const std::string& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) dropFromCache(e.path().string());
}

// dd-like: `bytes` in 4 MiB writes, then fsync; returns seconds.
double rawWrite(const std::string& path, size_t bytes) {
  std::vector<char> block(size_t{4} << 20, 'x');
  const auto start = Clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  for (size_t done = 0; done < bytes; done += block.size())
    if (::write(fd, block.data(), std::min(block.size(), bytes - done)) < 0) std::perror("write");
  ::fsync(fd);
  ::close(fd);
  return seconds(start);
}

double rawRead(const std::string& path) {
  dropFromCache(path);
  std::vector<char> block(size_t{4} << 20);
  const auto start = Clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY);
  while (::read(fd, block.data(), block.size()) > 0) {
  }
  ::close(fd);
  return seconds(start);
}

struct Workload {
  torch::nn::Sequential net;
  std::unique_ptr<strata::DistributedModel> model;
  std::unique_ptr<strata::DistributedOptimizer> opt;
};

// --mb MB of parameters in Linear(4096, 4096) layers, with SGD momentum after one step.
Workload makeWorkload(int mb) {
  namespace nn = torch::nn;
  constexpr int64_t kIn = 4096, kOut = 4096;  // 64 MiB of float32 per layer
  const int layers = std::max(1, static_cast<int>(int64_t{mb} * (1 << 20) / (kIn * kOut * 4)));
  Workload w;
  for (int i = 0; i < layers; ++i) w.net->push_back(nn::Linear(nn::LinearOptions(kIn, kOut).bias(false)));
  w.model = std::make_unique<strata::DistributedModel>(w.net);
  w.opt = std::make_unique<strata::DistributedOptimizer>(
      torch::optim::SGD(w.model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9)), *w.model);
  w.opt->zero_grad();
  w.model->step(torch::randn({2, kIn}), torch::zeros({2}), [](strata::DistributedModel& m, const torch::Tensor& x,
                                                              const torch::Tensor&) {
    auto loss = m(x).sum();
    m.backward(loss);
    return loss;
  });
  w.opt->step();  // momentum buffers exist now: the state is 2 x parameters
  return w;
}

void measureThroughput(Workload& w, const std::string& dir, int repeats) {
  std::vector<double> writeGBs, readGBs, rawWriteGBs, rawReadGBs;
  uint64_t bytes = 0;
  for (int r = 0; r < repeats; ++r) {
    const std::string root = dir + "/ckpt";
    fs::remove_all(root);
    strata::SaveOptions so;
    so.step = r + 1;
    auto start = Clock::now();
    const std::string saved = strata::save(root, *w.model, *w.opt, so);
    const double writeSecs = seconds(start);
    bytes = fs::file_size(saved + "/model.pt");
    writeGBs.push_back(bytes / writeSecs / 1e9);
    dropTreeFromCache(root);
    start = Clock::now();
    strata::load(root, *w.model, *w.opt);
    readGBs.push_back(bytes / seconds(start) / 1e9);

    const std::string raw = dir + "/raw.bin";
    rawWriteGBs.push_back(bytes / rawWrite(raw, bytes) / 1e9);
    rawReadGBs.push_back(bytes / rawRead(raw) / 1e9);
    fs::remove(raw);
    std::printf("repeat %d: %.2f GB state, save %.2f GB/s, load %.2f GB/s, raw write %.2f GB/s, raw read %.2f GB/s\n",
                r + 1, bytes / 1e9, writeGBs.back(), readGBs.back(), rawWriteGBs.back(), rawReadGBs.back());
  }
  fs::remove_all(dir + "/ckpt");
  std::printf("# checkpoint state GB: %.3f\n", bytes / 1e9);
  std::printf("# checkpoint write GB/s: %.3f\n", median(writeGBs));
  std::printf("# checkpoint read GB/s: %.3f\n", median(readGBs));
  std::printf("# raw disk write GB/s: %.3f\n", median(rawWriteGBs));
  std::printf("# raw disk read GB/s: %.3f\n", median(rawReadGBs));
  std::printf("# checkpoint write / raw disk: %.3f\n", median(writeGBs) / median(rawWriteGBs));
  std::printf("# checkpoint read / raw disk: %.3f\n", median(readGBs) / median(rawReadGBs));
}

// One "training step" of fixed work, in seconds.
double computeStep(const torch::Tensor& a) {
  const auto start = Clock::now();
  torch::Tensor c = torch::mm(a, a);
  (void)c.sum().item<float>();
  return seconds(start);
}

strata::CheckpointManager makeManager(Workload& w, const std::string& root, bool async) {
  strata::CheckpointOptions co;
  co.dir = root;
  co.everySteps = 0;
  co.resume = 0;
  co.keep = 1;
  co.partial = 0;
  co.async = async ? 1 : 0;
  return strata::CheckpointManager(*w.model, *w.opt, nullptr, co);
}

void measureStall(Workload& w, const std::string& dir, int repeats) {
  const torch::Tensor a = torch::randn({512, 512});
  std::vector<double> syncStall, asyncStall, asyncSnapshot, publish, idleStep, busyStep;
  double firstAsyncStall = 0;
  uint64_t snapshotBytes = 0;
  {
    strata::CheckpointManager sync = makeManager(w, dir + "/stall-sync", false);
    for (int r = 0; r < repeats; ++r) {
      sync.save(r + 1);
      syncStall.push_back(sync.stats().lastStallMs / 1e3);
      std::printf("sync save %d: stall %.3f s\n", r + 1, syncStall.back());
    }
  }
  fs::remove_all(dir + "/stall-sync");
  {
    strata::CheckpointManager async = makeManager(w, dir + "/stall-async", true);
    for (int r = 0; r <= repeats; ++r) {
      async.save(r + 1);
      const strata::CheckpointStats s = async.stats();
      const auto returned = Clock::now();
      int steps = 0;
      double busy = 0;
      while (async.stats().inFlightStep >= 0) {  // training goes on during the write
        busy += computeStep(a);
        ++steps;
      }
      async.wait();
      const double publishSecs = seconds(returned);
      double idle = 0;
      for (int i = 0; i < std::max(steps, 1); ++i) idle += computeStep(a);
      std::printf("async save %d: stall %.3f s (snapshot %.3f s), published %.3f s later; compute step %.2f ms "
                  "during the write (%d steps), %.2f ms idle\n",
                  r + 1, s.lastStallMs / 1e3, s.lastSnapshotMs / 1e3, publishSecs,
                  steps ? 1e3 * busy / steps : 0.0, steps, 1e3 * idle / std::max(steps, 1));
      snapshotBytes = s.snapshotBytes;
      if (r == 0) {
        firstAsyncStall = s.lastStallMs / 1e3;  // allocates the snapshot buffers
        continue;
      }
      asyncStall.push_back(s.lastStallMs / 1e3);
      asyncSnapshot.push_back(s.lastSnapshotMs / 1e3);
      publish.push_back(publishSecs);
      if (steps > 0) {
        busyStep.push_back(1e3 * busy / steps);
        idleStep.push_back(1e3 * idle / steps);
      }
    }
  }
  fs::remove_all(dir + "/stall-async");
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("# sync save stall s: %.3f\n", median(syncStall));
  std::printf("# async save stall s: %.3f\n", median(asyncStall));
  std::printf("# async first save stall s: %.3f\n", firstAsyncStall);
  std::printf("# async snapshot GB/s: %.3f\n", snapshotBytes / 1e9 / std::max(median(asyncSnapshot), 1e-9));
  std::printf("# async publish after save s: %.3f\n", median(publish));
  std::printf("# async stall / sync stall: %.3f\n", median(asyncStall) / std::max(median(syncStall), 1e-9));
  std::printf("# compute step ms idle: %.2f\n", median(idleStep));
  std::printf("# compute step ms during background write: %.2f\n", median(busyStep));
  std::printf("# async snapshot host GB: %.3f\n", snapshotBytes / 1e9);
  std::printf("# peak RSS GB: %.3f\n", usage.ru_maxrss * 1024.0 / 1e9);  // ru_maxrss is in KiB
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "checkpoint-bench-tmp";
  int mb = 512;
  int repeats = 3;
  std::string part = "all";
  CLI::App app{"Checkpoint throughput vs the raw disk, and the training stall per save (sync vs async)"};
  app.add_option("--dir", dir, "scratch directory on the disk to measure (removed afterwards)");
  app.add_option("--mb", mb, "parameter megabytes (the state is twice this)")->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "measurements per quantity (median reported)")->check(CLI::PositiveNumber);
  app.add_option("--part", part, "what to measure")->check(CLI::IsMember({"all", "throughput", "stall"}));
  CLI11_PARSE(app, argc, argv);
  strata::InitOptions io;
  io.configJson = R"({"output_dir": ")" + dir + R"(/run", "profiler": {"disable_profiler": true}})";
  strata::init(io);
  fs::create_directories(dir);
  {
    Workload w = makeWorkload(mb);
    if (part != "stall") measureThroughput(w, dir, repeats);
    if (part != "throughput") measureStall(w, dir, repeats);
  }
  fs::remove_all(dir);
  strata::finalize();
  return 0;
}
