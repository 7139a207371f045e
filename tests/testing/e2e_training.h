// What the programs that train for real (the end-to-end checks in tests/torch and tests/pp,
// the checkpoint tests' jobs) share: a seeded classifier, one training step through
// DistributedModel::step in any layout, and the frame of a checking main(): train on every
// rank, then rank 0 checks what the job left on disk.
#pragma once

#include <torch/torch.h>

#include <cstdio>
#include <exception>
#include <string>

#include "strata/strata.h"
#include "testing/e2e_checker.h"

namespace strata::testing {

// fc1 (in -> hidden), relu, fc2 (hidden -> classes), log_softmax: the same weights on every
// rank for the same seed.
inline torch::nn::Sequential seededClassifier(uint64_t seed, int64_t in, int64_t hidden, int64_t classes) {
  torch::manual_seed(seed);
  return torch::nn::Sequential({{"fc1", torch::nn::Linear(in, hidden)},
                                {"relu", torch::nn::ReLU()},
                                {"fc2", torch::nn::Linear(hidden, classes)},
                                {"log_softmax", torch::nn::LogSoftmax(1)}});
}

enum class Loss { kMse, kNll };

// One optimizer step on the batch (x, y): zero_grad, DistributedModel::step (which splits it
// into microbatches when the model is a pipeline), the optimizer's step.
inline void trainStep(DistributedModel& model, DistributedOptimizer& opt, const torch::Tensor& x,
                      const torch::Tensor& y, Loss loss) {
  opt.zero_grad();
  model.step(x, y, [loss](DistributedModel& m, const torch::Tensor& in, const torch::Tensor& target) {
    auto l = loss == Loss::kMse ? torch::mse_loss(m(in), target) : torch::nll_loss(m(in), target);
    m.backward(l);
    return l;
  });
  opt.step();
}

// The main() of a checking end-to-end program: init, train() on every rank, finalize; then
// rank 0 runs check(output dir, world size, checker) on the files the job wrote and prints
// PASS or the number of problems. Exit code 0 when all is well, 1 on a problem or an error.
template <typename Train, typename Check>
int trainThenCheck(int argc, char** argv, Train train, Check check) {
  try {
    strata::init(argc, argv);
    const std::string dir = strata::outputDir();
    const int rank = strata::rank(), worldSize = strata::size();
    train();
    strata::finalize();
    if (rank != 0) return 0;
    Checker c;
    check(dir, worldSize, c);
    std::printf(c.problems == 0 ? "PASS\n" : "%d problem(s)\n", c.problems);
    return c.problems == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace strata::testing
