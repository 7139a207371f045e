// Debugger and profiler overhead on the Fashion-MNIST example's training loop (2 ranks):
// the same CNN, data, sampler and optimizer as examples/fashion_mnist, timed per step on
// rank 0 after a warm-up. What is on is set by the job config (--config), so one binary
// measures every case; bench/run_overhead.sh writes the configs, interleaves the cases
// (A/B/A/B ...) and prints the "# overhead ..." lines.
//
//   mpirun -np 2 build/bench/overhead_bench --config job.json --steps 300 --warmup 30
//
// Prints on rank 0 (after finalize, so everything the debugger queued is on disk):
//   # step_ms_mean: <mean step time over the timed steps>
//   # step_ms_median: <median>
//   # debugger_bytes: <bytes under <output_dir>/events and index>
//   # debugger_mb_per_s: <those bytes / the timed steps' wall time>
//   # cpu_ms_per_step: <rank 0's CPU time (all its threads: training, intra-op, communication,
//                       debugger writer, profiler) over the timed steps, per step>
//   # fast_path_ns_per_forward: <DistributedModel::forward's instrumentation check when
//                                nothing is due and the timeline is off, per call>
// CPU time is far less sensitive than wall time to other processes on a shared machine, so
// it resolves small overheads that the step time's noise hides.
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <filesystem>

#include "../examples/fashion_mnist/fashion_mnist.h"
#include "strata/strata.h"
#include "adapter/observe/layer_instrumentation.h"

namespace {

using Clock = std::chrono::steady_clock;

// examples/fashion_mnist/main.cpp's model.
torch::nn::Sequential makeCnn() {
  namespace nn = torch::nn;
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 8, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                        nn::Conv2d(nn::Conv2dOptions(8, 16, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                        nn::Flatten(), nn::Linear(16 * 7 * 7, 64), nn::ReLU(), nn::Linear(64, 10), nn::LogSoftmax(1));
}

double processCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

uint64_t bytesUnder(const std::filesystem::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file(ec)) total += e.file_size(ec);
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config, dataDir = fashion::kDefaultDataDir;
  int64_t steps = 300, warmup = 30, batchSize = 64, fastPathCalls = 200000;
  CLI::App app{"Debugger/profiler overhead on the Fashion-MNIST training loop"};
  app.add_option("--config", config, "job config (JSON)");
  app.add_option("--steps", steps, "timed steps")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed steps first");
  app.add_option("--batch-size", batchSize, "global batch size")->check(CLI::PositiveNumber);
  app.add_option("--data-dir", dataDir, "Fashion-MNIST folder");
  app.add_option("--fast-path-calls", fastPathCalls, "calls per round of the instrumentation-check timing")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    strata::init(argc, argv);
    const int64_t localBatch = batchSize / strata::dp_size();
    fashion::FashionMnist train(dataDir, fashion::FashionMnist::Split::kTrain);
    torch::manual_seed(1);
    auto net = makeCnn();
    strata::DistributedModel model(net);
    strata::DistributedOptimizer opt(
        torch::optim::SGD(model.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9)), model);
    strata::DistributedSampler::Options so;
    so.dropLast = true;
    strata::DistributedSampler sampler(*train.size(), so);
    auto loader = torch::data::make_data_loader(train.map(torch::data::transforms::Stack<>()), sampler,
                                                torch::data::DataLoaderOptions().batch_size(localBatch));
    std::vector<double> stepMs;
    int64_t step = 0;
    Clock::time_point timedStart;
    double cpuStartMs = processCpuMs();
    auto last = Clock::now();
    while (step < warmup + steps) {
      for (auto& batch : *loader) {
        if (step >= warmup + steps) break;
        opt.zero_grad();
        model.step(batch.data, batch.target,
                   [](strata::DistributedModel& m, const torch::Tensor& x, const torch::Tensor& y) {
                     auto loss = torch::nll_loss(m(x), y);
                     m.backward(loss);
                     return loss;
                   });
        opt.step();
        // A step runs from the previous step's end (data loading included) to this one's.
        const auto now = Clock::now();
        if (step + 1 == warmup) cpuStartMs = processCpuMs();
        if (step == warmup) timedStart = last;
        if (step >= warmup) stepMs.push_back(std::chrono::duration<double, std::milli>(now - last).count());
        last = now;
        ++step;
      }
    }
    // The per-forward cost of the instrumentation check in this configuration, alone: the
    // same trivial forward function called directly and through instrument::forward (which
    // returns it unchanged when nobody needs per-layer data). Meaningful for the cases
    // where nothing is due at this step (dbg_default, prof_default, off).
    const torch::Tensor probe = torch::zeros({1});
    const std::function<torch::Tensor(const torch::Tensor&)> identity = [](const torch::Tensor& x) { return x; };
    auto timeCalls = [&](bool instrumented) {
      const auto start = Clock::now();
      for (int64_t i = 0; i < fastPathCalls; ++i) {
        const torch::Tensor out = instrumented ? strata::instrument::forward(*net, identity, probe) : identity(probe);
        if (!out.defined()) std::abort();
      }
      return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / static_cast<double>(fastPathCalls);
    };
    timeCalls(true);
    double instrumentedNs = 1e30, plainNs = 1e30;  // best of 7 rounds each, interleaved
    for (int round = 0; round < 7; ++round) {
      instrumentedNs = std::min(instrumentedNs, timeCalls(true));
      plainNs = std::min(plainNs, timeCalls(false));
    }
    const double fastPathNs = instrumentedNs - plainNs;
    const double timedSeconds = std::chrono::duration<double>(last - timedStart).count();
    const double cpuMs = processCpuMs() - cpuStartMs;
    const std::string outputDir = strata::outputDir();
    const int rank = strata::rank();
    strata::finalize();
    if (rank == 0) {
      double sum = 0;
      for (double v : stepMs) sum += v;
      std::sort(stepMs.begin(), stepMs.end());
      const uint64_t bytes = bytesUnder(std::filesystem::path(outputDir) / "events") +
                             bytesUnder(std::filesystem::path(outputDir) / "index");
      std::printf("# step_ms_mean: %.4f\n", sum / static_cast<double>(stepMs.size()));
      std::printf("# step_ms_median: %.4f\n", stepMs[stepMs.size() / 2]);
      std::printf("# debugger_bytes: %llu\n", static_cast<unsigned long long>(bytes));
      std::printf("# debugger_mb_per_s: %.3f\n", static_cast<double>(bytes) / 1e6 / timedSeconds);
      std::printf("# cpu_ms_per_step: %.4f\n", cpuMs / static_cast<double>(stepMs.size()));
      std::printf("# fast_path_ns_per_forward: %.1f\n", fastPathNs);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
