// A GPT-style byte-level language model trained on Debian's fortunes with AdamW, in any
// layout the job config asks for:
//
//   build/examples/transformer_lm --config examples/transformer_lm/job.json               # one process
//   mpirun -np 2 build/examples/transformer_lm --config examples/transformer_lm/job_dp.json
//   mpirun -np 2 build/examples/transformer_lm --config examples/transformer_lm/job_pipeline.json
//   mpirun -np 4 build/examples/transformer_lm --config examples/transformer_lm/job_hybrid.json
//
// The global batch (--batch-size) and the data order (--seed) are the same in every layout;
// each data-parallel replica reads its slice. Rank 0 shows progress and ends with
//   final: step=<n> loss=<x> params_sha256=<hex>
// (loss: the last step's training loss, mean over the global batch; the hash: every parameter
// of the whole model in sorted path order, the tied head once, digested where it lives), so
// runs can be compared across layouts. With --checkpoint-dir it checkpoints every
// --checkpoint-every steps and on SIGTERM/Ctrl-C, and --resume continues from the newest
// complete checkpoint, also one written with another layout.
#include <CLI/CLI.hpp>
#include <torch/nn/functional/loss.h>
#include <torch/optim/adamw.h>
#include <torch/utils.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "../common/progress.h"
#include "../common/strata_main.h"
#include "corpus.h"
#include "gpt.h"
#include "model.h"
#include "params_digest.h"
#include "strata/debugger.h"
#include "strata/strata.h"

namespace {

// A /proc/self/status field in MiB ("VmRSS": resident now, "VmHWM": peak so far); -1 if absent.
double procStatusMib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string key;
  double kib = -1;
  while (status >> key) {
    if (key == field + ":") {
      status >> kib;
      return kib / 1024;
    }
    status.ignore(1 << 12, '\n');
  }
  return -1;
}

struct Flags {
  std::string config;
  int64_t maxSteps = 300;
  int64_t batchSize = 16;  // global: split evenly over the data-parallel replicas
  double lr = 1e-3;
  double weightDecay = 0.1;
  uint64_t seed = 1;
  lm::GptConfig model;
  std::string dataDir = lm::kDefaultCorpusDir;
  int64_t evalBatches = 4;
  std::string checkpointDir;
  int64_t checkpointEvery = -1;
  bool resume = false;
  bool fullCheckpoint = false;
  bool pipelineStats = false;
};

// The pipeline's bubble per step, in the simulator's convention (idle / (ranks x step), the
// step being the slowest rank's executor time; bench/pipeline_bench.cpp measures it alike),
// beside the plan's prediction from the measured layer costs. Steps after the first (which
// plans) count; the medians are printed on rank 0.
class BubbleMeter {
 public:
  void record(const strata::PipelineStats& st) {
    double worst = st.stepSeconds, compute = st.computeSeconds;
    strata::world().allreduce(&worst, &worst, 1, strata::DType::kFloat64, strata::ReduceOp::kMax);
    strata::world().allreduce(&compute, &compute, 1, strata::DType::kFloat64, strata::ReduceOp::kSum);
    if (worst <= 0) return;
    steps_.push_back(worst);
    bubbles_.push_back(1.0 - compute / (strata::size() * worst));
    predictedBubble_ = st.predictedBubble;
    predictedStep_ = st.predictedStepSeconds;
  }
  void print() {
    if (strata::rank() != 0 || steps_.empty()) return;
    std::printf("pipeline: steps=%zu bubble_measured=%.4f bubble_predicted=%.4f step_ms=%.2f predicted_step_ms=%.2f\n",
                steps_.size(), median(bubbles_), predictedBubble_, median(steps_) * 1e3, predictedStep_ * 1e3);
  }

 private:
  static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
  std::vector<double> steps_, bubbles_;
  double predictedBubble_ = 0, predictedStep_ = 0;
};

// AdamW with GPT's split: matrices (embeddings and projections) decay, vectors (biases,
// LayerNorm) do not. A tied tensor is stepped once.
torch::optim::AdamW makeAdamW(const std::vector<torch::Tensor>& params, const Flags& flags) {
  std::vector<torch::Tensor> decay, noDecay;
  std::set<const void*> seen;
  for (const auto& p : params) {
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
    (p.dim() >= 2 ? decay : noDecay).push_back(p);
  }
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(flags.lr).betas({0.9, 0.95}).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(flags.weightDecay));
  groups.emplace_back(noDecay, options(0.0));
  return torch::optim::AdamW(groups, torch::optim::AdamWOptions(flags.lr));
}

torch::Tensor lossOf(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

// Mean over the world (data-parallel replicas hold different values; pipeline ranks equal ones).
double worldMean(double value) {
  strata::world().allreduce(&value, &value, 1, strata::DType::kFloat64, strata::ReduceOp::kAvg);
  return value;
}

double validationLoss(strata::DistributedModel& model, lm::TextData& data, const Flags& flags) {
  const int64_t batches = std::min(flags.evalBatches, data.validationBatches(flags.batchSize));
  if (batches <= 0) return 0;
  torch::NoGradGuard noGrad;
  model.eval();
  double sum = 0;
  for (int64_t i = 0; i < batches; ++i) {
    const lm::Batch b = data.validationBatch(i, flags.batchSize, strata::dp_rank(), strata::dp_size());
    sum += lossOf(model(b.tokens), b.targets).item<double>();
  }
  model.train();
  return worldMean(sum / static_cast<double>(batches));
}

strata::CheckpointOptions checkpointOptions(const Flags& flags) {
  strata::CheckpointOptions o;
  o.dir = flags.checkpointDir;  // "": the job config's checkpoint.dir
  o.everySteps = flags.checkpointEvery;
  if (flags.resume) o.resume = 1;
  if (flags.fullCheckpoint) o.partial = 0;
  return o;
}

void printHeader(const Flags& flags, const lm::TextData& data) {
  if (strata::rank() != 0) return;
  const int64_t params = flags.model.numParameters();
  std::printf(
      "transformer_lm: %lld parameters (%.1f MB with gradients and AdamW state), %lld layers, d_model %lld, "
      "%lld heads, seq_len %lld\n",
      (long long)params, static_cast<double>(params) * 16 / 1e6, (long long)flags.model.layers,
      (long long)flags.model.dModel, (long long)flags.model.heads, (long long)flags.model.seqLen);
  std::printf("layout: %d rank(s) = %d pipeline stage(s) x %d data-parallel replica(s); global batch %lld; corpus %lld "
              "training bytes, %lld validation bytes\n",
              strata::size(), strata::pp_size(), strata::dp_size(), (long long)flags.batchSize,
              (long long)data.trainBytes(), (long long)data.validationBytes());
  std::fflush(stdout);
}

int run(const Flags& flags) {
  if (flags.batchSize % strata::dp_size() != 0)
    throw strata::ConfigError("--batch-size " + std::to_string(flags.batchSize) + " must be a multiple of the " +
                              std::to_string(strata::dp_size()) + " data-parallel replicas");
  lm::TextData data(lm::readCorpus(flags.dataDir), flags.model.seqLen, flags.seed);
  const lm::GptModel gpt = lm::describeGpt(flags.model);
  torch::manual_seed(flags.seed);  // each layer's initial weights: from this seed and its path
  // A pipeline builds only this rank's layers, planned on a batch shaped like the training ones.
  const lm::Batch example = data.trainBatch(0, flags.batchSize, strata::dp_rank(), strata::dp_size());
  strata::DistributedModel model(gpt.layers, example.tokens);
  strata::DistributedOptimizer opt(makeAdamW(model.parameters(), flags), model);
  strata::CheckpointManager ckpt(model, opt, nullptr, checkpointOptions(flags));
  printHeader(flags, data);
  int64_t step = ckpt.resume();
  const int64_t firstStep = step;
  if (step > 0 && strata::rank() == 0) std::printf("resumed at step %lld\n", (long long)step);
  examples::Progress progress(flags.maxSteps, "train");
  double lastLoss = 0;
  bool stopped = false;
  BubbleMeter bubble;
  while (step < flags.maxSteps && !stopped) {
    const lm::Batch batch = data.trainBatch(step, flags.batchSize, strata::dp_rank(), strata::dp_size());
    opt.zero_grad();
    const strata::StepOutput out =
        model.step(batch.tokens, batch.targets,
                   [](strata::DistributedModel& m, const torch::Tensor& x, const torch::Tensor& y) {
                     torch::Tensor loss = lossOf(m(x), y);
                     m.backward(loss);
                     return loss;
                   });
    opt.step();
    if (flags.pipelineStats && strata::pp_size() > 1 && step > firstStep) bubble.record(model.pipeline_stats());
    ++step;
    lastLoss = worldMean(out.reduce_mean().item<double>());
    strata::debugger::save_scalar("train_loss", lastLoss);
    progress.update(step, (step - firstStep) * flags.batchSize, lastLoss);
    stopped = ckpt.after_step(step);  // collective: a stop request (SIGTERM, a rule) saved a checkpoint
  }
  progress.finish();
  bubble.print();
  if (stopped && strata::rank() == 0)
    std::printf("stopped at step %lld: %s\n", (long long)step, strata::stop_reason().c_str());
  if (flags.evalBatches > 0) {
    const double val = validationLoss(model, data, flags);
    if (strata::rank() == 0) std::printf("validation: loss=%.6f\n", val);
  }
  // Every rank: what its optimizer keeps (dataparallel.shard_optimizer_state divides it).
  std::printf("rank %d: optimizer_state_bytes=%zu (%s) rss_mib=%.1f peak_rss_mib=%.1f\n", strata::rank(),
              opt.state_bytes(), opt.host_shared() ? "sharded, host-shared parameters"
                                 : opt.sharded()     ? "sharded"
                                                     : "not sharded",
              procStatusMib("VmRSS"),
              procStatusMib("VmHWM"));
  std::fflush(stdout);
  const std::string hash = lm::paramsSha256(model, gpt.tiedAliases);
  if (strata::rank() == 0)
    std::printf("final: step=%lld loss=%.6f params_sha256=%s\n", (long long)step, lastLoss, hash.c_str());
  return ckpt.exit_code();
}

void addFlags(CLI::App& app, Flags& f) {
  app.add_option("--config", f.config, "job config (JSON): the layout, debugger, profiler, rules, checkpoints");
  app.add_option("--max-steps", f.maxSteps, "train until this many steps are done")->check(CLI::NonNegativeNumber);
  app.add_option("--layers", f.model.layers, "transformer blocks")->check(CLI::PositiveNumber);
  app.add_option("--d-model", f.model.dModel, "model width")->check(CLI::PositiveNumber);
  app.add_option("--heads", f.model.heads, "attention heads (must divide --d-model)")->check(CLI::PositiveNumber);
  app.add_option("--seq-len", f.model.seqLen, "context length in bytes")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", f.batchSize, "global batch size (sequences per step)")->check(CLI::PositiveNumber);
  app.add_option("--dropout", f.model.dropout, "dropout probability")->check(CLI::Range(0.0, 0.99));
  app.add_option("--lr", f.lr, "AdamW learning rate")->check(CLI::PositiveNumber);
  app.add_option("--weight-decay", f.weightDecay, "AdamW weight decay of the matrices")->check(CLI::NonNegativeNumber);
  app.add_option("--seed", f.seed, "seed of the initial weights, the data order and dropout");
  app.add_option("--data-dir", f.dataDir, "folder of plain-text files (default: Debian's fortunes)");
  app.add_option("--eval-batches", f.evalBatches, "validation batches at the end (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--checkpoint-dir", f.checkpointDir, "checkpoint folder (default: the job config's checkpoint.dir)");
  app.add_option("--checkpoint-every", f.checkpointEvery, "checkpoint every N steps (0: only on stop requests)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--resume", f.resume, "continue from the newest complete checkpoint (any layout)");
  app.add_flag("--pipeline-stats", f.pipelineStats,
               "print the pipeline's measured bubble beside the predicted one (median over the steps after the first)");
  app.add_flag("--full-checkpoint", f.fullCheckpoint, "write full checkpoints (default with a pipeline: per-rank)");
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"GPT-style byte-level language model on Debian's fortunes, trained with Strata"};
  addFlags(app, flags);
  if (const auto code = examples::parseFlags(app, argc, argv)) return *code;
  const std::string invalid = flags.model.invalidReason();
  if (!invalid.empty()) {
    std::fprintf(stderr, "error: %s\n", invalid.c_str());
    return strata::kExitConfigError;
  }
  return examples::runWithStrata(argc, argv, [&flags] { return run(flags); });
}
