// End to end under mpirun (2 ranks, tests/torch/pipeline_debugger_e2e.sh): a 2-stage
// pipeline (manual partition: fc1, relu on stage 0; fc2, log_softmax on stage 1) trained with
// the debugger saving weights, gradients and losses from every worker. After finalize, rank 0
// reads the trial back with our reader and checks that each rank saved what it owns: its
// stage's weights and gradients under smdebug's names, the loss only on the last stage,
// every step complete, and the saved weights equal to the parameters each stage had when
// the step began (rank 1 sends its values to rank 0 for the comparison).
#include <torch/torch.h>

#include <cstdio>
#include <set>

#include "debugger/trial.h"
#include "strata/strata.h"
#include "testing/e2e_checker.h"
#include "testing/e2e_training.h"

namespace {

constexpr int64_t kSteps = 4;

using strata::testing::Checker;

bool hasTensor(const strata::debugger::Trial& trial, const std::string& name) {
  const auto names = trial.tensorNames();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::set<std::string> workersOf(const strata::debugger::Trial& trial, const std::string& name, int64_t step) {
  const auto w = trial.tensor(name).workers(step);
  return {w.begin(), w.end()};
}

// fc1.weight at the start of step 2 as this rank's stage sees it (stage 0 owns it).
torch::Tensor trainAndKeepStep2Weight() {
  torch::nn::Sequential net = strata::testing::seededClassifier(7, 6, 16, 3);
  strata::DistributedModel model(net);
  strata::DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 0.1), model);
  torch::Tensor fc1AtStep2;
  for (int64_t step = 0; step < kSteps; ++step) {
    torch::Tensor x = torch::randn({8, 6}), y = torch::randint(0, 3, {8});
    if (step == 2) fc1AtStep2 = net->named_parameters()["fc1.weight"].detach().clone();
    strata::testing::trainStep(model, opt, x, y, strata::testing::Loss::kNll);
  }
  return fc1AtStep2;
}

void checkTrial(const std::string& dir, const torch::Tensor& fc1AtStep2, Checker& c) {
  strata::debugger::Trial trial(dir);
  c.expect(trial.workers() == std::vector<std::string>{"worker_0", "worker_1"}, "both workers write");
  std::vector<int64_t> all;
  for (int64_t s = 0; s < kSteps; ++s) all.push_back(s);
  c.expect(trial.steps() == all, "every step complete");
  const std::set<std::string> stage0{"worker_0"}, stage1{"worker_1"};
  for (int64_t step = 0; step < kSteps; ++step) {
    const std::string at = " at step " + std::to_string(step);
    for (const char* name : {"Sequential_fc1.weight", "Sequential_fc1.bias"}) {
      c.expect(hasTensor(trial, name) && workersOf(trial, name, step) == stage0, std::string(name) + " only on stage 0" + at);
      const std::string grad = std::string("gradient/") + name;
      c.expect(hasTensor(trial, grad) && workersOf(trial, grad, step) == stage0, grad + " only on stage 0" + at);
    }
    for (const char* name : {"Sequential_fc2.weight", "Sequential_fc2.bias"}) {
      c.expect(hasTensor(trial, name) && workersOf(trial, name, step) == stage1, std::string(name) + " only on stage 1" + at);
      const std::string grad = std::string("gradient/") + name;
      c.expect(hasTensor(trial, grad) && workersOf(trial, grad, step) == stage1, grad + " only on stage 1" + at);
    }
  }
  const auto losses = trial.tensorNames("losses");
  c.expect(losses.size() == 1, "one loss tensor");
  if (losses.size() == 1) c.expect(workersOf(trial, losses[0], 1) == stage1, "the loss only on the last stage");
  // The saved value is the parameter at the start of the step.
  const auto saved = trial.tensor("Sequential_fc1.weight").value(2, "worker_0").toDoubles();
  const torch::Tensor expected = fc1AtStep2.to(torch::kFloat64).contiguous();
  c.expect(static_cast<int64_t>(saved.size()) == expected.numel(), "fc1.weight size");
  if (static_cast<int64_t>(saved.size()) == expected.numel()) {
    const double* e = expected.data_ptr<double>();
    bool equal = true;
    for (size_t i = 0; i < saved.size(); ++i) equal = equal && saved[i] == e[i];
    c.expect(equal, "saved fc1.weight at step 2 equals stage 0's parameter then");
  }
}

}  // namespace

int main(int argc, char** argv) {
  torch::Tensor fc1AtStep2;
  return strata::testing::trainThenCheck(
      argc, argv, [&] { fc1AtStep2 = trainAndKeepStep2Weight(); },
      [&](const std::string& dir, int /*worldSize*/, Checker& c) { checkTrial(dir, fc1AtStep2, c); });
}
