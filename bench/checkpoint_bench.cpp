// Checkpoint write and read throughput for about 1 GB of training state, against the raw
// speed of the same disk measured in the same run (write + fsync of the same byte count,
// and a cold read of it).
//
//   build/bench/checkpoint_bench [--dir DIR] [--mb 512] [--repeats 3]
//
// The state: a stack of Linear layers holding --mb MB of float32 parameters, plus SGD
// momentum buffers of the same size (one training step creates them): 2 x --mb MB in all.
// "write": strata::save (full checkpoint: serialise, SHA-256, write, fsync, rename, fsync
// dir, manifest). "read": strata::load of the root (the finder re-hashes the shard to
// verify it, then the archive is read and copied into the model), with the file's pages
// dropped from the page cache first (posix_fadvise DONTNEED after fsync), so reads come
// from the disk. Medians over --repeats. Ends with `# <metric>: <value>` lines.
#include <fcntl.h>
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

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "checkpoint-bench-tmp";
  int mb = 512;
  int repeats = 3;
  CLI::App app{"Checkpoint write/read throughput vs the raw disk"};
  app.add_option("--dir", dir, "scratch directory on the disk to measure (removed afterwards)");
  app.add_option("--mb", mb, "parameter megabytes (the state is twice this)")->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "measurements per quantity (median reported)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  strata::InitOptions io;
  io.configJson = R"({"output_dir": ")" + dir + R"(/run", "profiler": {"disable_profiler": true}})";
  strata::init(io);
  fs::create_directories(dir);

  namespace nn = torch::nn;
  constexpr int64_t kIn = 4096, kOut = 4096;  // 64 MiB of float32 per layer
  const int layers = std::max(1, static_cast<int>(int64_t{mb} * (1 << 20) / (kIn * kOut * 4)));
  nn::Sequential net;
  for (int i = 0; i < layers; ++i) net->push_back(nn::Linear(nn::LinearOptions(kIn, kOut).bias(false)));
  strata::DistributedModel model(net);
  strata::DistributedOptimizer opt(torch::optim::SGD(model.parameters(), torch::optim::SGDOptions(0.01).momentum(0.9)),
                                   model);
  opt.zero_grad();
  model.step(torch::randn({2, kIn}), torch::zeros({2}), [](strata::DistributedModel& m, const torch::Tensor& x,
                                                           const torch::Tensor&) {
    auto loss = m(x).sum();
    m.backward(loss);
    return loss;
  });
  opt.step();  // momentum buffers exist now: the state is 2 x parameters

  std::vector<double> writeGBs, readGBs, rawWriteGBs, rawReadGBs;
  uint64_t bytes = 0;
  for (int r = 0; r < repeats; ++r) {
    const std::string root = dir + "/ckpt";
    fs::remove_all(root);
    strata::SaveOptions so;
    so.step = r + 1;
    auto start = Clock::now();
    const std::string saved = strata::save(root, model, opt, so);
    const double writeSecs = seconds(start);
    bytes = fs::file_size(saved + "/model.pt");
    writeGBs.push_back(bytes / writeSecs / 1e9);
    dropTreeFromCache(root);
    start = Clock::now();
    strata::load(root, model, opt);
    readGBs.push_back(bytes / seconds(start) / 1e9);

    const std::string raw = dir + "/raw.bin";
    rawWriteGBs.push_back(bytes / rawWrite(raw, bytes) / 1e9);
    rawReadGBs.push_back(bytes / rawRead(raw) / 1e9);
    fs::remove(raw);
    std::printf("repeat %d: %.2f GB state, save %.2f GB/s, load %.2f GB/s, raw write %.2f GB/s, raw read %.2f GB/s\n",
                r + 1, bytes / 1e9, writeGBs.back(), readGBs.back(), rawWriteGBs.back(), rawReadGBs.back());
  }
  fs::remove_all(dir);
  std::printf("# checkpoint state GB: %.3f\n", bytes / 1e9);
  std::printf("# checkpoint write GB/s: %.3f\n", median(writeGBs));
  std::printf("# checkpoint read GB/s: %.3f\n", median(readGBs));
  std::printf("# raw disk write GB/s: %.3f\n", median(rawWriteGBs));
  std::printf("# raw disk read GB/s: %.3f\n", median(rawReadGBs));
  std::printf("# checkpoint write / raw disk: %.3f\n", median(writeGBs) / median(rawWriteGBs));
  std::printf("# checkpoint read / raw disk: %.3f\n", median(readGBs) / median(rawReadGBs));
  strata::finalize();
  return 0;
}
