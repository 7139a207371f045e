// End to end under mpirun (2 ranks, tests/torch/instrumented_training_e2e.sh): data-parallel
// training of a named Sequential with the debugger and the profiler configured as a user
// would (instrumented_training_e2e.sh writes the job config), through DistributedModel,
// DistributedOptimizer, DistributedSampler and libtorch's DataLoader. After finalize, rank 0
// reads the trial with our reader and the profiler files with our readers and checks:
// both workers, every step complete (the evaluation and prediction forwards after training
// are EVAL and PREDICT steps), layer outputs under smdebug's names (the custom
// ".*relu_output" collection included); per rank, step events and the model's forward and
// backward at every step, numbered per mode; per-layer forward and backward, AllReduce per
// bucket, the exposed wait and data loading inside the framework window only; system
// metrics files. Exit status 0 when everything holds, 1 with one line per problem.
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <set>
#include <thread>

#include "debugger/trial.h"
#include "profiler/timeline_reader.h"
#include "profiler/trace_check.h"  // tests/profiler
#include "strata/strata.h"
#include "testing/e2e_checker.h"
#include "testing/e2e_training.h"
#include "testing/e2e_profiler_files.h"

namespace {

namespace fs = std::filesystem;
constexpr int64_t kSteps = 6;
constexpr int64_t kWindowStart = 1, kWindowSteps = 3;  // as in instrumented_training_e2e.sh
constexpr int64_t kEvalSteps = 2, kPredictSteps = 1;

class Synthetic : public torch::data::datasets::Dataset<Synthetic> {
 public:
  Synthetic() : x_(torch::randn({256, 8})), y_(torch::randint(0, 4, {256})) {}
  torch::data::Example<> get(size_t i) override {
    return {x_[static_cast<int64_t>(i)], y_[static_cast<int64_t>(i)]};
  }
  torch::optional<size_t> size() const override { return static_cast<size_t>(x_.size(0)); }

 private:
  torch::Tensor x_, y_;
};

void train() {
  torch::nn::Sequential net = strata::testing::seededClassifier(11, 8, 32, 4);
  strata::DistributedModel model(net);
  strata::DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 0.05), model);
  strata::DistributedSampler sampler(256);
  auto loader = torch::data::make_data_loader(Synthetic().map(torch::data::transforms::Stack<>()), sampler,
                                              torch::data::DataLoaderOptions().batch_size(16));
  int64_t step = 0;
  for (auto& batch : *loader) {
    if (step++ >= kSteps) break;
    strata::testing::trainStep(model, opt, batch.data, batch.target, strata::testing::Loss::kNll);
  }
  // Evaluation after training, then inference: each forward is one EVAL / PREDICT step (as
  // each top-level forward is for smdebug's hook), not a forward of the last TRAIN step.
  torch::NoGradGuard noGrad;
  model.eval();
  for (int64_t i = 0; i < kEvalSteps; ++i) model(torch::randn({16, 8}));
  model.set_mode(strata::Mode::kPredict);
  for (int64_t i = 0; i < kPredictSteps; ++i) model(torch::randn({4, 8}));
  model.train();
}

using strata::testing::Checker;

template <typename T>
std::string join(const T& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ",") + std::string(i);
  return out;
}

void checkTrial(const std::string& dir, Checker& c) {
  strata::debugger::Trial trial(dir);
  c.expect(trial.workers() == std::vector<std::string>{"worker_0", "worker_1"}, "workers: " + join(trial.workers()));
  std::vector<int64_t> all;
  for (int64_t s = 0; s < kSteps + kEvalSteps + kPredictSteps; ++s) all.push_back(s);
  c.expect(trial.steps() == all, "every step complete on both workers");
  using strata::Mode;
  c.expect(trial.steps(Mode::kEval) == std::vector<int64_t>{0, 1}, "EVAL steps 0, 1");
  c.expect(trial.steps(Mode::kPredict) == std::vector<int64_t>{0}, "PREDICT step 0");
  const auto& relu = trial.tensor("relu_output_0");
  c.expect(relu.steps(Mode::kEval) == std::vector<int64_t>{0, 1}, "relu output at both EVAL steps");
  c.expect(relu.value(0, "worker_0", Mode::kPredict).shape == std::vector<int64_t>{4, 32},
           "relu output of the PREDICT step (its batch of 4)");
  c.expect(trial.tensorNames("custom") == std::vector<std::string>{"relu_output_0"},
           "custom collection: " + join(trial.tensorNames("custom")));
  const auto outputs = trial.tensorNames("outputs");
  for (const char* name : {"fc1_output_0", "relu_output_0", "fc2_output_0", "log_softmax_output_0",
                           "Sequential_output_0"})
    c.expect(std::find(outputs.begin(), outputs.end(), name) != outputs.end(), std::string("output ") + name);
  // A log-softmax output: every row's probabilities sum to 1, on both workers.
  for (const char* worker : {"worker_0", "worker_1"}) {
    const auto v = trial.tensor("log_softmax_output_0").value(2, worker);
    const auto values = v.toDoubles();
    c.expect(v.shape == std::vector<int64_t>{16, 4}, std::string("log_softmax_output_0 shape on ") + worker);
    for (size_t row = 0; row + 4 <= values.size(); row += 4) {
      double sum = 0;
      for (size_t k = 0; k < 4; ++k) sum += std::exp(values[row + k]);
      c.expect(std::abs(sum - 1) < 1e-4, std::string("softmax row sums to 1 on ") + worker);
    }
  }
}

void checkProfiler(const std::string& dir, Checker& c) {
  const std::string root = dir + "/profiler-output";
  strata::profiler::TimelineReader reader(root);
  strata::testing::checkProfilerFiles(reader, root, 2, c);
  for (int rank = 0; rank < 2; ++rank) {
    strata::profiler::TraceQuery q;
    q.rank = rank;
    std::map<std::string, std::multiset<std::string>> names;  // phase -> names
    std::set<int64_t> detailedStepNums;
    std::map<std::string, std::set<int64_t>> stepEvents;  // phase -> step_num
    for (const auto& e : reader.events(q)) {
      names[e.phase].insert(e.name);
      if (!e.stepNum()) continue;
      if (e.phase.rfind("Step:ModeKeys.", 0) == 0) stepEvents[e.phase].insert(*e.stepNum());
      else if (e.phase != "Forward" && e.phase != "Backward(post-forward)") detailedStepNums.insert(*e.stepNum());
    }
    const std::string r = "rank " + std::to_string(rank) + ": ";
    // Step events for every step of every mode, numbered per mode (smdebug's step_num).
    c.expect(stepEvents["Step:ModeKeys.TRAIN"] == std::set<int64_t>{0, 1, 2, 3, 4, 5}, r + "TRAIN step events");
    c.expect(stepEvents["Step:ModeKeys.EVAL"] == std::set<int64_t>{0, 1}, r + "EVAL step events");
    c.expect(stepEvents["Step:ModeKeys.PREDICT"] == std::set<int64_t>{0}, r + "PREDICT step events");
    c.expect(!detailedStepNums.empty() && *detailedStepNums.begin() >= kWindowStart &&
                 *detailedStepNums.rbegin() < kWindowStart + kWindowSteps,
             r + "detailed events only inside the window");
    for (const char* layer : {"fc1", "relu", "fc2", "log_softmax"}) {
      c.expect(names["Forward-SubModuleInternal"].count(layer) == kWindowSteps, r + "forward of " + layer);
      c.expect(names["Backward-SubModuleInternal"].count(layer) == kWindowSteps, r + "backward of " + layer);
    }
    // The model's own forward and backward at every step, inside the window or not.
    c.expect(names["Forward"].count("Sequential") == kSteps + kEvalSteps + kPredictSteps,
             r + "model forward: " + std::to_string(names["Forward"].count("Sequential")));
    c.expect(names["Backward(post-forward)"].count("Sequential") == kSteps,
             r + "model backward: " + std::to_string(names["Backward(post-forward)"].count("Sequential")));
    c.expect(names["AllReduce"].size() >= kWindowSteps, r + "AllReduce per bucket");
    c.expect(names["AllReduceWait"].size() == kWindowSteps, r + "exposed AllReduce wait");
    c.expect(names["DataLoaderIter"].size() == kWindowSteps, r + "data loading");
    c.expect(names["Optimizer"].count("step") == kWindowSteps,
             r + "optimizer steps: " + std::to_string(names["Optimizer"].count("step")));
  }
}

}  // namespace

int main(int argc, char** argv) {
  return strata::testing::trainThenCheck(
      argc, argv,
      [] {
        train();
        // The system sampler (every 100 ms) writes from its second sample on: give it a few
        // intervals, as any real job's duration does.
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
      },
      [](const std::string& dir, int /*worldSize*/, Checker& c) {
        checkTrial(dir, c);
        checkProfiler(dir, c);
      });
}
