// Shared by the checkpoint round-trip tests (one process, torch-linked): a small training job
// (dropout, BatchNorm, a DistributedSampler, an optimizer with state), a copy of every part of
// its state for comparisons, and saving through either path: strata::save (synchronous) or
// a CheckpointManager with async on (written by the checkpoint thread, then waited for).
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "debugger/torch_hook.h"
#include "strata/checkpoint.h"
#include "strata/strata.h"
#include "testing/e2e_training.h"

namespace strata_test {

namespace fs = std::filesystem;

inline const std::string& tempRoot() {
  static const std::string root = (fs::temp_directory_path() / ("strata-ckpt-rt-" + std::to_string(getpid()))).string();
  return root;
}

using OptimizerFactory = std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor>)>;

inline std::unique_ptr<torch::optim::Optimizer> makeAdam(std::vector<torch::Tensor> params) {
  return std::make_unique<torch::optim::Adam>(std::move(params), torch::optim::AdamOptions(0.01));
}

inline torch::nn::Sequential makeNet() {
  namespace nn = torch::nn;
  return nn::Sequential(nn::Linear(6, 12), nn::BatchNorm1d(12), nn::ReLU(), nn::Dropout(0.3), nn::Linear(12, 3),
                        nn::LogSoftmax(1));
}

struct Job {
  explicit Job(const OptimizerFactory& makeOptimizer = makeAdam)
      : opt(makeOptimizer(model.parameters()), model) {}

  torch::nn::Sequential net = makeNet();
  strata::DistributedModel model{net};
  strata::DistributedOptimizer opt;
  strata::DistributedSampler sampler{40, strata::DistributedSampler::Options{}};
  torch::Tensor x = torch::randn({40, 6});
  torch::Tensor y = torch::randint(0, 3, {40}, torch::kInt64);

  void train(int steps) {
    for (int i = 0; i < steps; ++i) {
      auto idx = sampler.next(8);
      if (!idx) {
        sampler.reset();
        idx = sampler.next(8);
      }
      const auto t = torch::tensor(std::vector<int64_t>(idx->begin(), idx->end()), torch::kInt64);
      strata::testing::trainStep(model, opt, x.index_select(0, t), y.index_select(0, t), strata::testing::Loss::kNll);
    }
  }
};

struct Snapshot {
  std::vector<torch::Tensor> tensors;  // parameters, then buffers
  std::vector<torch::Tensor> adam;     // exp_avg, exp_avg_sq per parameter
  std::vector<int64_t> adamSteps;
  torch::Tensor rng;
  uint64_t samplerEpoch = 0;
  size_t samplerPosition = 0;
  int64_t modelSteps = 0;
  int64_t debuggerStep = 0;
};

// Reads Adam's state: the job must use makeAdam.
inline Snapshot snapshot(Job& job) {
  Snapshot s;
  for (const auto& p : job.net->parameters()) s.tensors.push_back(p.detach().clone());
  for (const auto& b : job.net->buffers()) s.tensors.push_back(b.detach().clone());
  for (const auto& p : job.net->parameters()) {
    auto& state = job.opt.optimizer().state();
    auto it = state.find(c10::guts::to_string(p.unsafeGetTensorImpl()));
    if (it == state.end()) continue;
    auto& adam = static_cast<torch::optim::AdamParamState&>(*it->second);
    s.adam.push_back(adam.exp_avg().clone());
    s.adam.push_back(adam.exp_avg_sq().clone());
    s.adamSteps.push_back(adam.step());
  }
  s.rng = at::detail::getDefaultCPUGenerator().get_state();
  s.samplerEpoch = job.sampler.epoch();
  s.samplerPosition = job.sampler.position();
  s.modelSteps = job.model.steps_taken();
  s.debuggerStep = strata::debugger::activeHook()->core().globalStep();
  return s;
}

inline void expectSame(const Snapshot& a, const Snapshot& b) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) EXPECT_TRUE(torch::equal(a.tensors[i], b.tensors[i])) << "tensor " << i;
  ASSERT_EQ(a.adam.size(), b.adam.size());
  ASSERT_FALSE(a.adam.empty());
  for (size_t i = 0; i < a.adam.size(); ++i) EXPECT_TRUE(torch::equal(a.adam[i], b.adam[i])) << "adam state " << i;
  EXPECT_EQ(a.adamSteps, b.adamSteps);
  EXPECT_TRUE(torch::equal(a.rng, b.rng)) << "CPU generator state";
  EXPECT_EQ(a.samplerEpoch, b.samplerEpoch);
  EXPECT_EQ(a.samplerPosition, b.samplerPosition);
  EXPECT_EQ(a.modelSteps, b.modelSteps);
}

enum class Mode { kSync, kAsync };

inline std::string modeName(const ::testing::TestParamInfo<Mode>& info) {
  return info.param == Mode::kSync ? "Sync" : "Async";
}

// Options of a CheckpointManager that saves in the background, only when asked (no periodic
// saves, no resume).
inline strata::CheckpointOptions asyncOptions(const std::string& root, int keep = 0, bool partial = false) {
  strata::CheckpointOptions co;
  co.dir = root;
  co.everySteps = 0;
  co.resume = 0;
  co.keep = keep;
  co.partial = partial ? 1 : 0;
  co.async = 1;
  return co;
}

// Saves a job's checkpoints into `root` the way `mode` says; every save returns once the
// checkpoint is complete.
class Saver {
 public:
  Saver(Mode mode, const std::string& root, Job& job, bool partial = false, int keep = -1)
      : root_(root), job_(job), partial_(partial), keep_(keep) {
    if (mode == Mode::kSync) return;
    manager_.emplace(job.model, job.opt, &job.sampler, asyncOptions(root, keep, partial));
    EXPECT_TRUE(manager_->async());
  }

  std::string save(int64_t step, int64_t epoch = 0) {
    if (!manager_) {
      strata::SaveOptions so;
      so.partial = partial_;
      so.step = step;
      so.epoch = epoch;
      so.sampler = &job_.sampler;
      so.keep = keep_;
      return strata::save(root_, job_.model, job_.opt, so);
    }
    const std::string dir = manager_->save(step, epoch);
    manager_->wait();
    EXPECT_EQ(manager_->stats().inFlightStep, -1);
    return dir;
  }

 private:
  std::string root_;
  Job& job_;
  bool partial_;
  int keep_;
  std::optional<strata::CheckpointManager> manager_;
};

}  // namespace strata_test
