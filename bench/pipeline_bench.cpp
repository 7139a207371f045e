// Pipeline parallelism on real compute: step time, throughput, measured bubble beside the
// simulator's prediction, peak stash per stage, for every (schedule, p, m); 2 stages against
// one process with 1 and 2 threads; the automatic partition against the best manual one.
//
//   mpirun -np 2 build/bench/pipeline_bench [--steps 5] [--width 512] [--layers 8]
//
// Every rank runs with torch::set_num_threads(1). A step's time is the slowest rank's
// executor time (median over --steps timed steps after one warm-up step that also plans).
// Measured bubble = 1 - mean over ranks of compute / step (the simulator's convention:
// idle / (ranks x step)). The single-process baselines run on rank 0 while rank 1 sleeps in a
// blocking receive (no spinning), accumulating the same m microbatches.
// Ends with the summary lines of issue 4.
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>

#include "strata/strata.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int steps = 5;
  int64_t width = 512;
  int layers = 8;
  int64_t batch = 64;
};

// `layers` Linear+ReLU pairs of equal width: balanced stages.
torch::nn::Sequential balancedNet(const Options& o) {
  torch::manual_seed(0);
  torch::nn::Sequential net;
  for (int i = 0; i < o.layers; ++i) {
    net->push_back(torch::nn::Linear(o.width, o.width));
    net->push_back(torch::nn::ReLU());
  }
  return net;
}

// Widths that make the best cut sit off the middle.
torch::nn::Sequential unbalancedNet(const Options& o) {
  torch::manual_seed(0);
  const std::vector<int64_t> widths = {o.width, 2 * o.width, o.width / 2, o.width, o.width / 2, o.width / 2,
                                       o.width};
  torch::nn::Sequential net;
  int64_t in = o.width;
  for (int64_t w : widths) {
    net->push_back(torch::nn::Linear(in, w));
    net->push_back(torch::nn::Tanh());
    in = w;
  }
  net->push_back(torch::nn::Linear(in, o.width));
  return net;
}

torch::Tensor mse(strata::DistributedModel& m, const torch::Tensor& x, const torch::Tensor& y) {
  auto loss = torch::mse_loss(m(x), y);
  m.backward(loss);
  return loss;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Result {
  double stepSeconds = 0;
  double measuredBubble = 0;
  double predictedBubble = 0;
  double predictedStepSeconds = 0;
  std::vector<int64_t> stashBytes;  // per pipeline rank
  std::vector<int> cut;
};

Result runPipeline(torch::nn::Sequential net, const Options& o, const std::string& mpJson) {
  strata::DistributedModelOptions options;
  options.modelParallel = mpJson;
  strata::DistributedModel model(net, options);
  strata::DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 1e-3), model);
  torch::set_num_threads(1);
  torch::manual_seed(1);
  const torch::Tensor x = torch::randn({o.batch, net[0]->as<torch::nn::Linear>()->options.in_features()});
  const torch::Tensor y = torch::randn({o.batch, o.width});
  std::vector<double> steps, bubbles;
  std::vector<int64_t> stash(static_cast<size_t>(strata::size()), 0);
  for (int s = 0; s <= o.steps; ++s) {
    strata::barrier();
    opt.zero_grad();
    model.step(x, y, mse);
    opt.step();
    if (s == 0) continue;  // warm-up: profiles and plans
    const strata::PipelineStats st = model.pipeline_stats();
    double v[2] = {st.stepSeconds, 1.0 - st.computeSeconds / st.stepSeconds};
    double worst = v[0];
    strata::world().allreduce(&worst, &worst, 1, strata::DType::kFloat64, strata::ReduceOp::kMax);
    strata::world().allreduce(&v[1], &v[1], 1, strata::DType::kFloat64, strata::ReduceOp::kAvg);
    steps.push_back(worst);
    bubbles.push_back(v[1]);
    int64_t mine = st.peakStashBytes;
    std::vector<int64_t> all(static_cast<size_t>(strata::size()));
    strata::world().allgather(&mine, all.data(), 1, strata::DType::kInt64);
    for (size_t r = 0; r < all.size(); ++r) stash[r] = std::max(stash[r], all[r]);
  }
  const strata::PipelineStats st = model.pipeline_stats();
  Result r;
  r.stepSeconds = median(steps);
  r.measuredBubble = median(bubbles);
  r.predictedBubble = st.predictedBubble;
  r.predictedStepSeconds = st.predictedStepSeconds;
  r.stashBytes = stash;
  r.cut = st.stageFirstLayer;
  return r;
}

std::string mpConfig(const std::string& pipeline, int p, int m, int v = 1, const std::string& manual = "") {
  std::string json = c10::str(R"({"enabled": true, "partitions": )", p, R"(, "microbatches": )", m,
                               R"(, "pipeline": ")", pipeline, R"(", "virtual_stages": )", v,
                               R"(, "active_microbatches": )", p);
  if (!manual.empty()) json += R"(, "auto_partition": false, "manual_partition": )" + manual;
  return json + "}";
}

// One process on rank 0 (rank 1 blocks in a receive): m microbatches accumulated with
// `threads` intra-op threads. Returns the median step seconds (broadcast to every rank).
double runSingleProcess(const Options& o, int m, int threads) {
  double seconds = 0;
  if (strata::rank() == 0) {
    auto net = balancedNet(o);
    torch::optim::SGD opt(net->parameters(), 1e-3);
    torch::set_num_threads(threads);
    torch::manual_seed(1);
    const torch::Tensor x = torch::randn({o.batch, o.width}), y = torch::randn({o.batch, o.width});
    std::vector<double> steps;
    for (int s = 0; s <= o.steps; ++s) {
      const auto start = Clock::now();
      opt.zero_grad();
      for (int mb = 0; mb < m; ++mb) {
        const int64_t size = o.batch / m;
        (torch::mse_loss(net->forward(x.narrow(0, mb * size, size)), y.narrow(0, mb * size, size)) / m).backward();
      }
      opt.step();
      if (s > 0) steps.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    torch::set_num_threads(1);
    seconds = median(steps);
    for (int r = 1; r < strata::size(); ++r) strata::world().send(&seconds, sizeof(seconds), r, 77);
  } else {
    strata::world().recv(&seconds, sizeof(seconds), 0, 77);
  }
  return seconds;
}

std::string bytesList(const std::vector<int64_t>& v) {
  std::string out;
  for (int64_t b : v) out += (out.empty() ? "" : "/") + std::to_string(b / 1024) + "K";
  return out;
}

std::string cutList(const std::vector<int>& v) {
  std::string out;
  for (int c : v) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Pipeline-parallel training benchmark (run under mpirun -np 2)"};
  app.add_option("--steps", o.steps, "timed steps per configuration");
  app.add_option("--width", o.width, "layer width");
  app.add_option("--layers", o.layers, "Linear+ReLU pairs of the balanced model");
  app.add_option("--batch", o.batch, "batch per step");
  CLI11_PARSE(app, argc, argv);
  strata::init(argc, argv);
  torch::set_num_threads(1);
  const int p = strata::size();
  const bool root = strata::rank() == 0;
  if (root) {
    std::printf("# pipeline_bench: %d ranks, 1 thread each, balanced model %d x Linear(%lld,%lld)+ReLU, batch %lld, "
                "%d timed steps (median)\n",
                p, o.layers, (long long)o.width, (long long)o.width, (long long)o.batch, o.steps);
    std::printf("%-12s %2s %2s %2s %10s %10s %9s %9s %8s %8s %-14s %s\n", "schedule", "p", "m", "v", "step_ms",
                "samples/s", "bubble%", "pred%", "meas/pred", "pred_ms", "peak_stash", "cut");
  }
  double bubbleRatioInterleaved8 = 0, pipelineStep8 = 0;
  struct Row { std::string schedule; int m; int v; };
  const std::vector<Row> rows = {{"simple", 2, 1},      {"simple", 4, 1},      {"simple", 8, 1},
                                 {"interleaved", 2, 1}, {"interleaved", 4, 1}, {"interleaved", 8, 1},
                                 {"interleaved", 8, 2}};
  for (const Row& row : rows) {
    const Result r = runPipeline(balancedNet(o), o, mpConfig(row.schedule, p, row.m, row.v));
    const double ratio = r.measuredBubble / std::max(1e-9, r.predictedBubble);
    if (row.schedule == "interleaved" && row.m == 8 && row.v == 1) {
      bubbleRatioInterleaved8 = ratio;
      pipelineStep8 = r.stepSeconds;
    }
    if (root)
      std::printf("%-12s %2d %2d %2d %10.1f %10.1f %9.1f %9.1f %8.2f %8.1f %-14s %s\n", row.schedule.c_str(), p, row.m,
                  row.v, r.stepSeconds * 1e3, o.batch / r.stepSeconds, r.measuredBubble * 100, r.predictedBubble * 100,
                  ratio, r.predictedStepSeconds * 1e3, bytesList(r.stashBytes).c_str(), cutList(r.cut).c_str());
  }
  const double one = runSingleProcess(o, 8, 1), two = runSingleProcess(o, 8, 2);
  if (root) {
    std::printf("single process m=8: 1 thread %.1f ms (%.1f samples/s), 2 threads %.1f ms (%.1f samples/s); "
                "2 stages %.1f ms\n",
                one * 1e3, o.batch / one, two * 1e3, o.batch / two, pipelineStep8 * 1e3);
  }
  // Automatic partition against every manual cut of an unbalanced model (p = 2 only).
  double autoStep = 0, bestManual = 1e30;
  std::string bestCut;
  if (p == 2) {
    const Result a = runPipeline(unbalancedNet(o), o, mpConfig("interleaved", 2, 8));
    autoStep = a.stepSeconds;
    const int children = static_cast<int>(unbalancedNet(o)->size());
    for (int cut = 2; cut < children; cut += 2) {  // after each Linear+Tanh pair
      std::string manual = "{";
      for (int i = 0; i < children; ++i) manual += c10::str(i ? ", " : "", "\"", i, "\": ", i < cut ? 0 : 1);
      manual += "}";
      const Result r = runPipeline(unbalancedNet(o), o, mpConfig("interleaved", 2, 8, 1, manual));
      if (root) std::printf("manual cut at %d: %.1f ms\n", cut, r.stepSeconds * 1e3);
      if (r.stepSeconds < bestManual) {
        bestManual = r.stepSeconds;
        bestCut = std::to_string(cut);
      }
    }
    if (root)
      std::printf("auto partition (cut %s): %.1f ms; best manual (cut %s): %.1f ms\n", cutList(a.cut).c_str(),
                  autoStep * 1e3, bestCut.c_str(), bestManual * 1e3);
  }
  if (root) {
    std::printf("# bubble measured/predicted interleaved p=%d m=8: %.2f\n", p, bubbleRatioInterleaved8);
    std::printf("# speedup 2-stage/1-thread m=8: %.2f\n", one / pipelineStep8);
    std::printf("# speedup 2-stage/2-thread m=8: %.2f\n", two / pipelineStep8);
    if (p == 2) std::printf("# auto/best-manual step time: %.2f\n", autoStep / bestManual);
  }
  strata::finalize();
  return 0;
}
