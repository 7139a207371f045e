// Pipeline parallelism on real compute: step time, throughput, measured bubble beside the
// simulator's prediction, peak stash per stage, for every (schedule, p, m); 2 stages against
// one process with 1 and 2 threads; the automatic partition against the best manual one.
//
//   mpirun -np 2 build/bench/pipeline_bench [--steps 5] [--width 512] [--layers 8] [--sleep-ms 0]
//
// Every rank runs with torch::set_num_threads(1). A step's time is the slowest rank's
// executor time (median over --steps timed steps after one warm-up step that also plans).
// Measured bubble = 1 - (compute summed over ranks) / (ranks x step), the simulator's
// convention (idle / (ranks x step)). The single-process baselines run on rank 0 while
// rank 1 sleeps in a blocking receive (no spinning), accumulating the same m microbatches.
// --sleep-ms replaces the layers by sleep layers (timing without CPU, for loaded machines).
// The automatic partition (p = 2) is compared with every contiguous manual partition of the
// unbalanced model. Ends with the summary lines of issues 4 and 14.
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <thread>

#include "strata/strata.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int steps = 5;
  int64_t width = 512;
  int layers = 8;
  int64_t batch = 64;
  double sleepMs = 0;  // > 0: sleep layers instead of Linear+ReLU (see SleepLayer)
};

// A layer that costs time but no CPU: forward sleeps `ms` per sample-block, backward twice
// as long: half for the input gradient (SleepFn) and half for the weight gradient
// (WeightSleepFn), like a Linear layer, so a split backward (zero_bubble) has a W to move. With it the pipeline's timing (bubble, overlap of 2 stages) can be measured on a
// loaded machine; the compute is perfectly parallel, so it checks the executor and schedule,
// not BLAS. The time scales with the microbatch size (ms per 8 samples), as real layers do.
struct SleepFn : torch::autograd::Function<SleepFn> {
  static void sleepFor(double ms) { std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms)); }
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, double ms) {
    const double scaled = ms * static_cast<double>(x.size(0)) / 8.0;
    ctx->saved_data["ms"] = scaled;
    sleepFor(scaled);
    return x.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    sleepFor(ctx->saved_data["ms"].toDouble());
    return {grads[0], torch::Tensor()};
  }
};

// Identity on the weight whose backward sleeps `ms` (already scaled): the W half.
struct WeightSleepFn : torch::autograd::Function<WeightSleepFn> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor weight, double ms) {
    ctx->saved_data["ms"] = ms;
    return weight.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    SleepFn::sleepFor(ctx->saved_data["ms"].toDouble());
    return {grads[0], torch::Tensor()};
  }
};

struct SleepLayerImpl : torch::nn::Module {
  explicit SleepLayerImpl(double ms) : ms(ms) { weight = register_parameter("weight", torch::ones({1})); }
  torch::Tensor forward(torch::Tensor x) {
    return SleepFn::apply(x, ms) * WeightSleepFn::apply(weight, ms * static_cast<double>(x.size(0)) / 8.0);
  }
  double ms;
  torch::Tensor weight;
};
TORCH_MODULE(SleepLayer);

// `layers` Linear+ReLU pairs of equal width: balanced stages.
torch::nn::Sequential balancedNet(const Options& o) {
  torch::manual_seed(0);
  torch::nn::Sequential net;
  for (int i = 0; i < o.layers; ++i) {
    if (o.sleepMs > 0) {
      net->push_back(SleepLayer(o.sleepMs));
      continue;
    }
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
  if (o.sleepMs > 0) {  // 1, 4, 1, 2, 1, 1, 2, 1 units
    for (double units : {1, 4, 1, 2, 1, 1, 2, 1}) net->push_back(SleepLayer(o.sleepMs * units));
    return net;
  }
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
  double computeSeconds = 0;  // per rank, mean
  double predictedBubble = 0;
  double predictedStepSeconds = 0;
  double idleSeconds = 0;  // summed over ranks, per step (median)
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
  const torch::Tensor x = torch::randn({o.batch, o.width});
  const torch::Tensor y = torch::randn({o.batch, o.width});
  std::vector<double> steps, bubbles, computes, idles;
  std::vector<int64_t> stash(static_cast<size_t>(strata::size()), 0);
  for (int s = 0; s <= o.steps; ++s) {
    strata::barrier();
    opt.zero_grad();
    model.step(x, y, mse);
    opt.step();
    if (s == 0) continue;  // warm-up: profiles and plans
    const strata::PipelineStats st = model.pipeline_stats();
    // The simulator's convention: idle / (ranks x step), step = the slowest rank's time.
    double worst = st.stepSeconds, compute = st.computeSeconds;
    strata::world().allreduce(&worst, &worst, 1, strata::DType::kFloat64, strata::ReduceOp::kMax);
    strata::world().allreduce(&compute, &compute, 1, strata::DType::kFloat64, strata::ReduceOp::kSum);
    steps.push_back(worst);
    bubbles.push_back(1.0 - compute / (strata::size() * worst));
    computes.push_back(compute / strata::size());
    idles.push_back(strata::size() * worst - compute);
    int64_t mine = st.peakStashBytes;
    std::vector<int64_t> all(static_cast<size_t>(strata::size()));
    strata::world().allgather(&mine, all.data(), 1, strata::DType::kInt64);
    for (size_t r = 0; r < all.size(); ++r) stash[r] = std::max(stash[r], all[r]);
  }
  const strata::PipelineStats st = model.pipeline_stats();
  Result r;
  r.stepSeconds = median(steps);
  r.measuredBubble = median(bubbles);
  r.computeSeconds = median(computes);
  r.idleSeconds = median(idles);
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

// One step of one process on rank 0 (rank 1 blocks in a receive, not spinning): m
// microbatches accumulated with `threads` intra-op threads. Returns the step seconds on
// every rank.
double singleProcessStep(torch::nn::Sequential& net, torch::optim::SGD& opt, const torch::Tensor& x,
                         const torch::Tensor& y, int m, int threads) {
  double seconds = 0;
  if (strata::rank() == 0) {
    torch::set_num_threads(threads);
    const auto start = Clock::now();
    opt.zero_grad();
    const int64_t size = x.size(0) / m;
    for (int mb = 0; mb < m; ++mb)
      (torch::mse_loss(net->forward(x.narrow(0, mb * size, size)), y.narrow(0, mb * size, size)) / m).backward();
    opt.step();
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
    torch::set_num_threads(1);
    for (int r = 1; r < strata::size(); ++r) strata::world().send(&seconds, sizeof(seconds), r, 77);
  } else {
    strata::world().recv(&seconds, sizeof(seconds), 0, 77);
  }
  return seconds;
}

struct Speedup {
  double pipeline = 0, oneThread = 0, twoThreads = 0;
};

// 2 stages against one process with 1 and 2 threads, the three measured in rotation (each
// round one step of each) so that all see the same background load; medians.
Speedup compareWithOneProcess(const Options& o, int m) {
  auto pipeNet = balancedNet(o);
  strata::DistributedModelOptions options;
  options.modelParallel = mpConfig("interleaved", strata::size(), m);
  strata::DistributedModel model(pipeNet, options);
  strata::DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 1e-3), model);
  auto net = balancedNet(o);
  torch::optim::SGD single(net->parameters(), 1e-3);
  torch::manual_seed(1);
  const torch::Tensor x = torch::randn({o.batch, o.width}), y = torch::randn({o.batch, o.width});
  std::vector<double> pipe, one, two;
  for (int round = 0; round <= o.steps; ++round) {
    strata::barrier();
    opt.zero_grad();
    model.step(x, y, mse);
    opt.step();
    double t = model.pipeline_stats().stepSeconds;
    strata::world().allreduce(&t, &t, 1, strata::DType::kFloat64, strata::ReduceOp::kMax);
    const double a = singleProcessStep(net, single, x, y, m, 1);
    const double b = singleProcessStep(net, single, x, y, m, 2);
    if (round == 0) continue;  // warm-up (the pipeline plans)
    pipe.push_back(t);
    one.push_back(a);
    two.push_back(b);
  }
  return {median(pipe), median(one), median(two)};
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
  app.add_option("--sleep-ms", o.sleepMs, "sleep layers of this many ms forward per 8 samples (0: real compute)");
  CLI11_PARSE(app, argc, argv);
  strata::init(argc, argv);
  torch::set_num_threads(1);
  const int p = strata::size();
  const bool root = strata::rank() == 0;
  if (root) {
    if (o.sleepMs > 0)
      std::printf("# pipeline_bench: %d ranks, 1 thread each, balanced model %d x sleep layer (%.1f ms forward, "
                  "%.1f ms backward per 8 samples), batch %lld, %d timed steps (median)\n",
                  p, o.layers, o.sleepMs, 2 * o.sleepMs, (long long)o.batch, o.steps);
    else
      std::printf("# pipeline_bench: %d ranks, 1 thread each, balanced model %d x Linear(%lld,%lld)+ReLU, batch %lld, "
                  "%d timed steps (median)\n",
                  p, o.layers, (long long)o.width, (long long)o.width, (long long)o.batch, o.steps);
    std::printf("%-12s %2s %2s %2s %10s %10s %10s %9s %9s %8s %8s %-14s %s\n", "schedule", "p", "m", "v", "step_ms",
                "compute_ms", "samples/s", "bubble%", "pred%", "meas/pred", "pred_ms", "peak_stash", "cut");
  }
  double bubbleRatioInterleaved8 = 0, bubbleRatioSimple8 = 0;
  double stepRatioInterleaved8 = 0, stepRatioSimple8 = 0;  // measured / predicted step time
  double idle1F1B8 = 0, idleZeroBubble8 = 0;  // interleaved with active_microbatches = p is 1F1B
  struct Row { std::string schedule; int m; int v; };
  const std::vector<Row> rows = {{"simple", 2, 1},      {"simple", 4, 1},      {"simple", 8, 1},
                                 {"interleaved", 2, 1}, {"interleaved", 4, 1}, {"interleaved", 8, 1},
                                 {"interleaved", 8, 2}, {"zero_bubble", 4, 1},  {"zero_bubble", 8, 1}};
  for (const Row& row : rows) {
    const Result r = runPipeline(balancedNet(o), o, mpConfig(row.schedule, p, row.m, row.v));
    const double ratio = r.measuredBubble / std::max(1e-9, r.predictedBubble);
    const double stepRatio = r.stepSeconds / std::max(1e-9, r.predictedStepSeconds);
    if (row.schedule == "interleaved" && row.m == 8 && row.v == 1) {
      bubbleRatioInterleaved8 = ratio;
      stepRatioInterleaved8 = stepRatio;
      idle1F1B8 = r.idleSeconds;
    }
    if (row.schedule == "simple" && row.m == 8) {
      bubbleRatioSimple8 = ratio;
      stepRatioSimple8 = stepRatio;
    }
    if (row.schedule == "zero_bubble" && row.m == 8) idleZeroBubble8 = r.idleSeconds;
    if (root)
      std::printf("%-12s %2d %2d %2d %10.1f %10.1f %10.1f %9.1f %9.1f %8.2f %8.1f %-14s %s\n", row.schedule.c_str(), p,
                  row.m, row.v, r.stepSeconds * 1e3, r.computeSeconds * 1e3, o.batch / r.stepSeconds,
                  r.measuredBubble * 100, r.predictedBubble * 100,
                  ratio, r.predictedStepSeconds * 1e3, bytesList(r.stashBytes).c_str(), cutList(r.cut).c_str());
  }
  const Speedup sp = compareWithOneProcess(o, 8);
  if (root) {
    std::printf("m=8 in rotation: 2 stages %.1f ms (%.1f samples/s); one process 1 thread %.1f ms (%.1f samples/s), "
                "2 threads %.1f ms (%.1f samples/s)\n",
                sp.pipeline * 1e3, o.batch / sp.pipeline, sp.oneThread * 1e3, o.batch / sp.oneThread,
                sp.twoThreads * 1e3, o.batch / sp.twoThreads);
  }
  // Automatic partition against every manual cut of an unbalanced model (p = 2 only), all
  // models alive at once and stepped in rotation so that they see the same background load.
  double autoStep = 0, bestManual = 1e30;
  if (p == 2) {
    const int children = static_cast<int>(unbalancedNet(o)->size());
    std::vector<std::string> configs = {mpConfig("interleaved", 2, 8)};
    std::vector<int> cuts = {-1};
    // Every contiguous 2-stage partition: a cut before each child but the first (also
    // between a Linear and its Tanh, where the automatic partition may cut too).
    for (int cut = 1; cut < children; ++cut) {
      std::string manual = "{";
      for (int i = 0; i < children; ++i) manual += c10::str(i ? ", " : "", "\"", i, "\": ", i < cut ? 0 : 1);
      configs.push_back(mpConfig("interleaved", 2, 8, 1, manual + "}"));
      cuts.push_back(cut);
    }
    struct Candidate {
      std::unique_ptr<strata::DistributedModel> model;
      std::unique_ptr<strata::DistributedOptimizer> opt;
      std::vector<double> steps;
    };
    std::vector<Candidate> candidates;
    for (const auto& json : configs) {
      strata::DistributedModelOptions options;
      options.modelParallel = json;
      Candidate c;
      c.model = std::make_unique<strata::DistributedModel>(unbalancedNet(o), options);
      c.opt = std::make_unique<strata::DistributedOptimizer>(torch::optim::SGD(c.model->parameters(), 1e-3), *c.model);
      candidates.push_back(std::move(c));
    }
    torch::manual_seed(1);
    const torch::Tensor x = torch::randn({o.batch, o.width}), y = torch::randn({o.batch, o.width});
    for (int round = 0; round <= o.steps; ++round)
      for (auto& c : candidates) {
        strata::barrier();
        c.opt->zero_grad();
        c.model->step(x, y, mse);
        c.opt->step();
        double t = c.model->pipeline_stats().stepSeconds;
        strata::world().allreduce(&t, &t, 1, strata::DType::kFloat64, strata::ReduceOp::kMax);
        if (round > 0) c.steps.push_back(t);
      }
    int bestCut = -1;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const double t = median(candidates[i].steps);
      if (i == 0) {
        autoStep = t;
        if (root)
          std::printf("auto partition (stages start at %s): %.1f ms\n",
                      cutList(candidates[i].model->pipeline_stats().stageFirstLayer).c_str(), t * 1e3);
      } else {
        if (root) std::printf("manual cut at %d: %.1f ms\n", cuts[i], t * 1e3);
        if (t < bestManual) {
          bestManual = t;
          bestCut = cuts[i];
        }
      }
    }
    if (root) std::printf("best manual cut at %d: %.1f ms\n", bestCut, bestManual * 1e3);
  }
  if (root) {
    // Sleep layers tag their lines, so the real-compute lines stay the canonical ones.
    const char* tag = o.sleepMs > 0 ? " (sleep layers)" : "";
    std::printf("# bubble measured/predicted interleaved p=%d m=8%s: %.2f\n", p, tag, bubbleRatioInterleaved8);
    std::printf("# bubble measured/predicted simple p=%d m=8%s: %.2f\n", p, tag, bubbleRatioSimple8);
    std::printf("# step measured/predicted interleaved p=%d m=8%s: %.2f\n", p, tag, stepRatioInterleaved8);
    std::printf("# step measured/predicted simple p=%d m=8%s: %.2f\n", p, tag, stepRatioSimple8);
    std::printf("# bubble zero-bubble/1F1B p=%d m=8%s: %.2f\n", p, tag, idleZeroBubble8 / std::max(1e-9, idle1F1B8));
    std::printf("# speedup 2-stage/1-thread m=8%s: %.2f\n", tag, sp.oneThread / sp.pipeline);
    std::printf("# speedup 2-stage/2-thread m=8%s: %.2f\n", tag, sp.twoThreads / sp.pipeline);
    if (p == 2) std::printf("# auto/best-manual step time%s: %.2f\n", tag, autoStep / bestManual);
  }
  strata::finalize();
  return 0;
}
