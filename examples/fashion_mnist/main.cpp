// Data-parallel training of a small CNN on Fashion-MNIST.
//
//   mpirun -np 2 build/examples/fashion_mnist --epochs 1
//
// Every rank reads its own shard of the training set; gradients are averaged across
// ranks while backward runs. Rank 0 shows progress and, at the end, one line
//   final: step=<n> loss=<x> accuracy=<y> params_sha256=<hex>
// whose hash covers every parameter in a fixed order (equal runs give equal hashes).
// With "checkpoint": {"every_steps": N, "resume": true} in the job config it checkpoints and
// resumes; SIGTERM or Ctrl-C finishes the step, checkpoints and exits with code 75
// (strata::kExitStopped), and a resumed run reaches the same params_sha256.
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <set>
#include <thread>

#include "../common/progress.h"
#include "../common/sha256.h"
#include "../common/strata_main.h"
#include "fashion_mnist.h"
#include "strata/debugger.h"
#include "strata/strata.h"

namespace {

struct Flags {
  std::string config;
  int epochs = 1;
  int64_t maxSteps = -1;
  int64_t batchSize = 64;  // global: split evenly over the data-parallel ranks
  double lr = 0.05;
  uint64_t seed = 1;
  std::string dataDir = fashion::kDefaultDataDir;
  int slowLoaderMs = 0;  // a data loader slowed on purpose (the Dataloader rule's end-to-end test)
};

torch::nn::Sequential makeCnn() {
  namespace nn = torch::nn;
  // Named children: the debugger's tensor names (`relu1_output_0`, `Sequential_fc1.weight`)
  // and a manual pipeline partition refer to these names.
  return nn::Sequential({{"conv1", nn::Conv2d(nn::Conv2dOptions(1, 8, 3).padding(1))},
                         {"relu1", nn::ReLU()},
                         {"pool1", nn::MaxPool2d(2)},
                         {"conv2", nn::Conv2d(nn::Conv2dOptions(8, 16, 3).padding(1))},
                         {"relu2", nn::ReLU()},
                         {"pool2", nn::MaxPool2d(2)},
                         {"flatten", nn::Flatten()},
                         {"fc1", nn::Linear(16 * 7 * 7, 64)},
                         {"relu3", nn::ReLU()},
                         {"fc2", nn::Linear(64, 10)},
                         {"log_softmax", nn::LogSoftmax(1)}});
}

// Every parameter of the whole model in a fixed order. Collective: with a pipeline each
// stage's parameters are taken from the rank that trains them (data-parallel replica 0),
// since the other ranks' copies of that stage are never updated.
std::string paramsSha256(strata::DistributedModel& model, const torch::nn::Module& net) {
  const auto named = net.named_parameters(true);
  std::vector<torch::Tensor> values;
  for (const auto& p : named) values.push_back(p.value().detach().clone().contiguous());
  if (model.partitioned()) {
    std::set<std::string> local;
    for (const auto& item : model.local_state_dict()) local.insert(item.key());
    torch::Tensor owner = torch::full({static_cast<int64_t>(named.size())}, -1, torch::kInt32);
    for (size_t i = 0; i < named.size(); ++i)
      if (model.dp_rank() == 0 && local.count(named[i].key())) owner[static_cast<int64_t>(i)] = strata::rank();
    strata::allreduce(owner, strata::ReduceOp::kMax);
    for (size_t i = 0; i < values.size(); ++i) strata::broadcast(values[i], owner[static_cast<int64_t>(i)].item<int>());
  }
  examples::Sha256 sha;
  for (size_t i = 0; i < named.size(); ++i) {
    const torch::Tensor& t = values[i];
    sha.add(named[i].key());
    sha.add(t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
  }
  return sha.hex();
}

double testAccuracy(strata::DistributedModel& model, const fashion::FashionMnist& test) {
  torch::NoGradGuard noGrad;
  model.eval();
  // Each data-parallel replica scores its contiguous part of the test set (the ranks of one
  // pipeline score the same part together); counts are summed across ranks.
  const int64_t n = test.images().size(0), per = (n + strata::dp_size() - 1) / strata::dp_size();
  const int64_t begin = std::min(n, per * strata::dp_rank()), end = std::min(n, begin + per);
  int64_t counts[2] = {0, 0};
  for (int64_t i = begin; i < end; i += 1000) {
    const int64_t len = std::min<int64_t>(1000, end - i);
    auto pred = model(test.images().narrow(0, i, len)).argmax(1);
    counts[0] += pred.eq(test.labels().narrow(0, i, len)).sum().item<int64_t>();
    counts[1] += len;
  }
  strata::world().allreduce(counts, counts, 2, strata::DType::kInt64);
  model.train();
  return static_cast<double>(counts[0]) / static_cast<double>(std::max<int64_t>(counts[1], 1));
}

int run(const Flags& flags) {
  const int64_t localBatch = flags.batchSize / strata::dp_size();

  if (localBatch * strata::dp_size() != flags.batchSize || localBatch == 0)
    throw strata::ConfigError("--batch-size " + std::to_string(flags.batchSize) +
                              " must be a positive multiple of the " + std::to_string(strata::dp_size()) +
                              " data-parallel ranks");
  fashion::FashionMnist train(flags.dataDir, fashion::FashionMnist::Split::kTrain);
  fashion::FashionMnist test(flags.dataDir, fashion::FashionMnist::Split::kTest);
  torch::manual_seed(flags.seed);
  auto net = makeCnn();
  strata::DistributedModel model(net);
  strata::DistributedOptimizer opt(torch::optim::SGD(model.parameters(), torch::optim::SGDOptions(flags.lr).momentum(0.9)),
                                   model);
  strata::DistributedSampler::Options so;
  so.seed = flags.seed;
  so.dropLast = true;
  strata::DistributedSampler sampler(*train.size(), so);
  // --slow-loader-ms: each example's fetch sleeps its share of the batch's delay.
  const auto exampleDelay = std::chrono::microseconds(int64_t{flags.slowLoaderMs} * 1000 / localBatch);
  auto loader = torch::data::make_data_loader(
      train
          .map(torch::data::transforms::Lambda<torch::data::Example<>>([exampleDelay](torch::data::Example<> e) {
            if (exampleDelay.count() > 0) std::this_thread::sleep_for(exampleDelay);
            return e;
          }))
          .map(torch::data::transforms::Stack<>()),
      sampler, torch::data::DataLoaderOptions().batch_size(localBatch));
  const int64_t stepsPerEpoch = static_cast<int64_t>(sampler.samples_per_rank()) / localBatch;
  // Checkpoints (the job config's "checkpoint" section): every_steps, on a stop request
  // (SIGTERM, Ctrl-C, a rule's StopTraining), and resume from the newest complete one. The
  // loader's copy of the sampler shares its state, so the position is saved and restored too.
  strata::CheckpointManager ckpt(model, opt, &sampler);
  int64_t step = ckpt.resume();
  const int firstEpoch = step > 0 ? static_cast<int>(std::max<int64_t>(1, ckpt.epoch())) : 1;
  if (strata::rank() == 0)
    std::printf("Fashion-MNIST: %d rank(s), global batch %lld (%lld per rank), %lld steps per epoch, %d thread(s) per rank\n",
                strata::size(), (long long)flags.batchSize, (long long)localBatch, (long long)stepsPerEpoch,
                torch::get_num_threads());
  double lastLoss = 0, accuracy = 0;
  bool stopped = false;  // every rank agreed to stop (a rule's StopTraining, SIGTERM...)
  std::deque<double> recentWindows;  // the last four 50-step mean losses
  for (int epoch = firstEpoch; epoch <= flags.epochs; ++epoch) {
    const int64_t doneBefore = epoch == firstEpoch ? step - (epoch - 1) * stepsPerEpoch : 0;  // resumed mid-epoch
    const int64_t steps =
        flags.maxSteps >= 0 ? std::min(stepsPerEpoch, doneBefore + flags.maxSteps - step) : stepsPerEpoch;
    examples::Progress progress(steps, "epoch " + std::to_string(epoch));
    int64_t done = doneBefore;
    double lossSum = 0;
    for (auto& batch : *loader) {
      if (done >= steps) break;
      opt.zero_grad();
      auto out = model.step(batch.data, batch.target,
                            [](strata::DistributedModel& m, const torch::Tensor& x, const torch::Tensor& y) {
                              auto loss = torch::nll_loss(m(x), y);
                              m.backward(loss);
                              return loss;
                            });
      opt.step();
      ++done;
      ++step;
      lossSum += out.reduce_mean().item<double>();
      if (done % 50 == 0 || done == steps) {
        double window[1] = {lossSum / (done % 50 == 0 ? 50 : done % 50)};
        strata::world().allreduce(window, window, 1, strata::DType::kFloat64, strata::ReduceOp::kAvg);
        lastLoss = window[0];
        // The training loss averaged over the last 200 steps and all ranks, for TensorBoard
        // (a smooth curve; job.json's LossNotDecreasing smooths the saved losses itself).
        recentWindows.push_back(lastLoss);
        if (recentWindows.size() > 4) recentWindows.pop_front();
        double recent = 0;
        for (double w : recentWindows) recent += w / static_cast<double>(recentWindows.size());
        strata::debugger::save_scalar("train_loss_avg200", recent);
        lossSum = 0;
        progress.update(done, done * flags.batchSize, lastLoss);
      }
      // Collective (should_stop() inside): every rank gets the same answer at the same step,
      // and a stop writes a checkpoint first.
      if (ckpt.after_step(step, epoch)) {
        stopped = true;
        break;
      }
    }
    progress.finish();
    accuracy = testAccuracy(model, test);
    if (strata::rank() == 0) std::printf("epoch %d: loss %.4f test accuracy %.4f\n", epoch, lastLoss, accuracy);
    if (stopped || (flags.maxSteps >= 0 && step >= flags.maxSteps)) break;
  }
  if (stopped) std::printf("rank %d stopped at step %lld: %s\n", strata::rank(), (long long)step,
                           strata::stop_reason().c_str());
  const std::string hash = paramsSha256(model, *net);
  if (strata::rank() == 0)
    std::printf("final: step=%lld loss=%.6f accuracy=%.4f params_sha256=%s\n", (long long)step, lastLoss, accuracy,
                hash.c_str());
  return ckpt.exit_code();  // strata::kExitStopped (75) after SIGTERM/SIGINT: resume later
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"Data-parallel Fashion-MNIST training with Strata"};
  app.add_option("--config", flags.config, "job config (JSON)");
  app.add_option("--epochs", flags.epochs, "epochs")->check(CLI::PositiveNumber);
  app.add_option("--max-steps", flags.maxSteps, "stop after this many steps (-1: no limit)");
  app.add_option("--batch-size", flags.batchSize, "global batch size")->check(CLI::PositiveNumber);
  app.add_option("--lr", flags.lr, "learning rate")->check(CLI::PositiveNumber);
  app.add_option("--seed", flags.seed, "seed of the initial weights and the shuffle");
  app.add_option("--data-dir", flags.dataDir, "folder with the Fashion-MNIST .gz files");
  app.add_option("--slow-loader-ms", flags.slowLoaderMs, "sleep this long in the data loader per batch (tests)")
      ->check(CLI::NonNegativeNumber);
  if (const auto code = examples::parseFlags(app, argc, argv)) return *code;
  return examples::runWithStrata(argc, argv, [&flags] { return run(flags); });
}
