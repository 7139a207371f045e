// Data-parallel weak scaling: a fixed per-rank batch at 1, 2, 4 ranks (run once per rank
// count under mpirun; bench/run_scaling.sh drives it and compares with PyTorch DDP).
//
//   mpirun -np 2 build/bench/scaling_bench --model mlp25m --steps 30 --batch 32
//
// Prints one line per run:
//   scaling model=<m> ranks=<n> samples_per_s=<x> step_ms=<t> compute_ms=<c> exposed_comm_ms=<e>
//   allreduce_ms=<a> other_ms=<o> exposed_comm_fraction=<f> queue_wait_ms=<q> comm_cpu_ms=<u>
// step = compute (forward + backward until the last gradient is produced, overlapped with
// communication) + exposed communication (waiting for the AllReduces after backward) +
// other (optimizer, zero_grad). Each *_ms figure is the maximum over ranks, taken on its own.
// comm_cpu_ms: the CPU time spent in the AllReduces per step by the threads that ran them
// (below allreduce_ms when the communication thread shared its core with the training
// thread): with one busy rank per core, CPU the compute did not get, however well the
// AllReduces overlap backward. Since session 14 the last bucket runs on the training thread
// when nothing else is in flight, and its CPU (waiting for the peer included) counts here too.
//
// --step-times FILE writes each timed step's duration in seconds, one per line (this rank's;
// bench/run_scaling.sh pairs the steps of unconnected runs by index to estimate what lockstep
// costs on these cores).
//
// exposed_comm_fraction: of the time the AllReduces ran (summed over ranks), the part the
// training thread waited for, in [0, 1]. Per rank the exposed part is min(wait, run time):
// a wait can outlast the AllReduces' run time by the time the communication thread took to
// be scheduled (queue_wait_ms, the largest over ranks; large when ranks outnumber cores),
// which is not communication. (Taking the two maxima over ranks separately, as the ratio of
// exposed_comm_ms to allreduce_ms does, can exceed 1: session 2 recorded 1.09.)
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "strata/strata.h"

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Workload {
  torch::nn::Sequential net;
  torch::Tensor x, y;
  bool classification = false;
};

Workload makeWorkload(const std::string& model, int64_t batch) {
  namespace nn = torch::nn;
  torch::manual_seed(0);
  Workload w;
  if (model == "cnn") {
    w.net = nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 8, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                           nn::Conv2d(nn::Conv2dOptions(8, 16, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                           nn::Flatten(), nn::Linear(16 * 7 * 7, 64), nn::ReLU(), nn::Linear(64, 10),
                           nn::LogSoftmax(1));
    w.x = torch::randn({batch, 1, 28, 28});
    w.y = torch::randint(0, 10, {batch});
    w.classification = true;
  } else if (model == "mlp25m") {
    // 1024*4096 + 4096*4096 + 4096*1024 weights: 25.2 M parameters, 100 MB of gradients.
    w.net = nn::Sequential(nn::Linear(1024, 4096), nn::ReLU(), nn::Linear(4096, 4096), nn::ReLU(),
                           nn::Linear(4096, 1024));
    w.x = torch::randn({batch, 1024});
    w.y = torch::randn({batch, 1024});
  } else {
    throw std::runtime_error("unknown --model " + model + " (cnn | mlp25m)");
  }
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "cnn", config, sharding = "none", stepTimesPath;
  int steps = 30, warmup = 5, threads = 0;
  int64_t batch = 32;
  CLI::App app{"Strata data-parallel weak-scaling benchmark"};
  app.add_option("--model", model, "cnn | mlp25m");
  app.add_option("--steps", steps, "timed steps");
  app.add_option("--warmup", warmup, "untimed steps first");
  app.add_option("--batch", batch, "per-rank batch");
  app.add_option("--config", config, "job config");
  app.add_option("--threads", threads, "intra-op threads per rank (0: cores / local ranks, the runtime's default)");
  app.add_option("--sharding", sharding,
                 "optimizer state: none | tensors (shard_optimizer_state) | host (and host_shared_parameters)")
      ->check(CLI::IsMember({"none", "tensors", "host"}));
  app.add_option("--step-times", stepTimesPath, "write this rank's timed step durations (s), one per line");
  CLI11_PARSE(app, argc, argv);
  strata::init(argc, argv);
  Workload w = makeWorkload(model, batch);
  strata::DistributedModel dmodel(w.net);
  strata::DistributedOptimizer opt(torch::optim::SGD(dmodel.parameters(), 0.01), dmodel,
                                   strata::DistributedOptimizerOptions{sharding == "none" ? 0 : 1, sharding == "host" ? 1 : 0});
  if (threads > 0) torch::set_num_threads(threads);  // after DistributedModel, which sets the default
  double compute = 0, other = 0, total = 0;
  std::vector<double> stepSeconds;
  stepSeconds.reserve(steps);
  for (int step = 0; step < warmup + steps; ++step) {
    if (step == warmup) {
      strata::world().barrier();
      dmodel.reset_stats();
      compute = other = 0;
    }
    const auto start = Clock::now();
    opt.zero_grad();
    auto out = dmodel.forward(w.x);
    auto loss = w.classification ? torch::nll_loss(out, w.y) : torch::mse_loss(out, w.y);
    loss.backward();
    const double backwardDone = secondsSince(start);
    dmodel.finish_gradient_sync();
    const auto optStart = Clock::now();
    opt.step();
    if (step >= warmup) {
      compute += backwardDone;
      other += secondsSince(optStart);
      stepSeconds.push_back(secondsSince(start));
      total += stepSeconds.back();
    }
  }
  strata::world().barrier();
  if (!stepTimesPath.empty()) {
    std::ofstream f(stepTimesPath);
    for (double t : stepSeconds) f << t << '\n';
    if (!f.flush()) throw std::runtime_error("--step-times: cannot write " + stepTimesPath);
  }
  const auto s = dmodel.stats();
  // The slowest rank decides the step time.
  double perRank[6] = {total, compute, s.exposedSeconds, s.allreduceSeconds,
                       std::max(0.0, s.exposedSeconds - s.allreduceSeconds), s.allreduceCpuSeconds};
  strata::world().allreduce(perRank, perRank, 6, strata::DType::kFloat64, strata::ReduceOp::kMax);
  double exposedSums[2] = {std::min(s.exposedSeconds, s.allreduceSeconds), s.allreduceSeconds};
  strata::world().allreduce(exposedSums, exposedSums, 2, strata::DType::kFloat64, strata::ReduceOp::kSum);
  const double exposedFraction = exposedSums[1] > 0 ? exposedSums[0] / exposedSums[1] : 0.0;
  const double stepMs = perRank[0] / steps * 1e3;
  const double samplesPerS = static_cast<double>(batch) * strata::size() * steps / perRank[0];
  if (strata::rank() == 0)
    std::printf("scaling model=%s ranks=%d threads=%d samples_per_s=%.1f step_ms=%.2f compute_ms=%.2f "
                "exposed_comm_ms=%.2f allreduce_ms=%.2f other_ms=%.2f exposed_comm_fraction=%.3f queue_wait_ms=%.2f "
                "comm_cpu_ms=%.2f sharding=%s host_shared=%d\n",
                model.c_str(), strata::size(), torch::get_num_threads(), samplesPerS, stepMs,
                perRank[1] / steps * 1e3, perRank[2] / steps * 1e3, perRank[3] / steps * 1e3,
                other / steps * 1e3, exposedFraction, perRank[4] / steps * 1e3, perRank[5] / steps * 1e3, sharding.c_str(), opt.host_shared() ? 1 : 0);
  strata::finalize();
  return 0;
}
