// Background checkpoint writes in one process (part of checkpoint_roundtrip_test): the state
// is copied at the step boundary, so training that goes on while the write is held back does
// not leak into the checkpoint (for every optimizer whose state is copied); the next save
// waits for the write in flight, visibly; a failed background write is logged, thrown at the
// next save on every rank, and leaves the previous checkpoint the newest complete one; an
// unsupported optimizer falls back to synchronous saves.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "adapter/checkpoint/checkpoint_async.h"
#include "strata/checkpoint.h"
#include "strata/exit_codes.h"
#include "strata/strata.h"
#include "test_job.h"

namespace {

using namespace strata_test;  // NOLINT: the shared test job
using std::chrono::milliseconds;

// Holds the background write of one step on the checkpoint thread, mid-shard, until
// release(); held() says it got there.
class WriteGate {
 public:
  explicit WriteGate(int64_t step) : step_(step) {
    strata::detail::TEST_setBackgroundWriteHook([this](int64_t step, int, uint64_t) {
      if (step != step_) return;
      std::unique_lock<std::mutex> lock(mu_);
      held_ = true;
      cv_.notify_all();
      cv_.wait_for(lock, std::chrono::seconds(120), [this] { return released_; });
    });
  }
  ~WriteGate() {
    release();
    strata::detail::TEST_setBackgroundWriteHook(nullptr);
  }
  // Waits (bounded) until the write reached the gate.
  bool waitHeld() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [this] { return held_; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  int64_t step_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  bool released_ = false;
};

std::string manifestOf(const std::string& root, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%012lld", static_cast<long long>(step));
  return root + "/" + name + "/manifest.json";
}

std::vector<torch::Tensor> stateTensors(Job& job) {
  std::vector<torch::Tensor> out;
  for (const auto& p : job.net->parameters()) out.push_back(p.detach().clone());
  for (const auto& b : job.net->buffers()) out.push_back(b.detach().clone());
  return out;
}

struct OptimizerCase {
  const char* name;
  OptimizerFactory make;
};

// The checkpoint of step 3 is held on the checkpoint thread while the job trains two more
// steps; a job resumed from it must then reach the same state bitwise: the copy was taken at
// the boundary, and the optimizer's state (moments, momentum, step counts, options) with it.
TEST(AsyncCheckpoint, TrainingWhileTheWriteIsInFlightDoesNotLeakIntoIt) {
  namespace optim = torch::optim;
  const std::vector<OptimizerCase> cases = {
      {"SGD", [](std::vector<torch::Tensor> p) {
         return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.05).momentum(0.9).nesterov(true));
       }},
      {"Adam", [](std::vector<torch::Tensor> p) {
         return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions(0.01).amsgrad(true));
       }},
      {"AdamW", [](std::vector<torch::Tensor> p) {
         return std::make_unique<optim::AdamW>(std::move(p), optim::AdamWOptions(0.01));
       }},
      {"Adagrad", [](std::vector<torch::Tensor> p) {
         return std::make_unique<optim::Adagrad>(std::move(p), optim::AdagradOptions(0.05));
       }},
      {"RMSprop", [](std::vector<torch::Tensor> p) {
         return std::make_unique<optim::RMSprop>(std::move(p),
                                                 optim::RMSpropOptions(0.01).momentum(0.5).centered(true));
       }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string root = tempRoot() + "/inflight-" + c.name;
    Job job(c.make);
    job.train(3);
    {
      strata::CheckpointManager ckpt(job.model, job.opt, &job.sampler, asyncOptions(root));
      ASSERT_TRUE(ckpt.async());
      WriteGate gate(3);
      ckpt.save(3, 0);
      ASSERT_TRUE(gate.waitHeld());
      job.train(2);  // the live state moves on while the copy waits to be written
      EXPECT_FALSE(std::filesystem::exists(manifestOf(root, 3))) << "published before its write finished";
      gate.release();
      ckpt.wait();
      EXPECT_TRUE(std::filesystem::exists(manifestOf(root, 3)));
      EXPECT_GT(ckpt.stats().snapshotBytes, 0u);
    }
    const std::vector<torch::Tensor> expected = stateTensors(job);

    Job resumed(c.make);
    resumed.x = job.x;
    resumed.y = job.y;
    strata::LoadOptions lo;
    lo.sampler = &resumed.sampler;
    const auto loaded = strata::load(root, resumed.model, resumed.opt, lo);
    ASSERT_TRUE(loaded);
    EXPECT_EQ(loaded->step, 3);
    resumed.train(2);
    const std::vector<torch::Tensor> got = stateTensors(resumed);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(torch::equal(got[i], expected[i])) << "tensor " << i;
  }
}

// Adam's snapshot is the parameters, the buffers and two moments per parameter, nothing more.
TEST(AsyncCheckpoint, SnapshotHoldsExactlyTheStateAndReusesItsBuffers) {
  Job job;
  job.train(1);
  strata::CheckpointManager ckpt(job.model, job.opt, &job.sampler, asyncOptions(tempRoot() + "/bytes"));
  ckpt.save(1, 0);
  ckpt.wait();
  uint64_t params = 0, buffers = 0;
  for (const auto& p : job.net->parameters()) params += p.nbytes();
  for (const auto& b : job.net->buffers()) buffers += b.nbytes();
  EXPECT_EQ(ckpt.stats().snapshotBytes, params + buffers + 2 * params);
  job.train(1);
  ckpt.save(2, 0);
  ckpt.wait();
  EXPECT_EQ(ckpt.stats().snapshotBytes, params + buffers + 2 * params);
  EXPECT_EQ(ckpt.stats().backgroundSaves, 2);
  EXPECT_EQ(ckpt.stats().waitedSaves, 0);
}

TEST(AsyncCheckpoint, NextSaveWaitsForTheWriteInFlight) {
  const std::string root = tempRoot() + "/waits";
  Job job;
  job.train(1);
  strata::CheckpointManager ckpt(job.model, job.opt, &job.sampler, asyncOptions(root));
  WriteGate gate(1);
  ckpt.save(1, 0);
  ASSERT_TRUE(gate.waitHeld());
  EXPECT_EQ(ckpt.stats().inFlightStep, 1);
  job.train(1);
  auto second = std::async(std::launch::async, [&] { return ckpt.save(2, 0); });
  // The second save must be waiting for the first write: poll (bounded) for it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!ckpt.stats().waiting && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(2));
  ASSERT_TRUE(ckpt.stats().waiting) << "the second save did not wait for the write in flight";
  EXPECT_EQ(second.wait_for(milliseconds(0)), std::future_status::timeout);
  EXPECT_FALSE(std::filesystem::exists(manifestOf(root, 1)));
  gate.release();
  second.get();
  EXPECT_TRUE(std::filesystem::exists(manifestOf(root, 1))) << "the first write was published before the second save";
  ckpt.wait();
  const strata::CheckpointStats s = ckpt.stats();
  EXPECT_EQ(s.waitedSaves, 1);
  EXPECT_GT(s.lastWaitMs, 0.0);
  EXPECT_GE(s.lastStallMs, s.lastWaitMs);
  EXPECT_EQ(s.backgroundSaves, 2);
  EXPECT_FALSE(s.waiting);
  const auto loaded = strata::load(root, job.model, job.opt);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->step, 2);
}

// What a rank writes first for a full shard; a directory there makes the write fail (the
// tests run as root, for whom permissions do not stop a write).
void obstructShard(const std::string& root, int64_t step) {
  const std::string manifest = manifestOf(root, step);
  const std::string dir = manifest.substr(0, manifest.rfind('/'));
  std::filesystem::create_directories(dir + "/model.pt.tmp-" + std::to_string(getpid()));
}

TEST(AsyncCheckpoint, AFailedWriteIsReportedAtTheNextSaveAndThePreviousCheckpointStillLoads) {
  const std::string root = tempRoot() + "/failing";
  Job job;
  job.train(1);
  strata::CheckpointManager ckpt(job.model, job.opt, &job.sampler, asyncOptions(root));
  ckpt.save(1, 0);
  ckpt.wait();
  const std::vector<torch::Tensor> atOne = stateTensors(job);

  obstructShard(root, 2);
  job.train(1);
  testing::internal::CaptureStderr();
  ckpt.save(2, 0);  // returns at once; the write fails in the background
  job.train(1);
  std::string thrown;
  try {
    ckpt.save(3, 0);
  } catch (const strata::Error& e) {
    thrown = e.what();
  }
  const std::string logged = testing::internal::GetCapturedStderr();
  EXPECT_NE(thrown.find("step-000000000002"), std::string::npos) << thrown;
  EXPECT_NE(thrown.find("failed on rank 0: writing its shard"), std::string::npos) << thrown;
  EXPECT_NE(thrown.find("Is a directory"), std::string::npos) << thrown;
  EXPECT_NE(logged.find("not published, the previous complete checkpoint stays the newest"), std::string::npos)
      << logged;
  EXPECT_FALSE(std::filesystem::exists(manifestOf(root, 2)));
  EXPECT_FALSE(std::filesystem::exists(manifestOf(root, 3))) << "the save that reported the failure took nothing";

  Job other;
  const auto loaded = strata::load(root, other.model, other.opt);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->step, 1);
  const std::vector<torch::Tensor> got = stateTensors(other);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(torch::equal(got[i], atOne[i])) << "tensor " << i;

  // Once reported, saving goes on.
  ckpt.save(4, 0);
  ckpt.wait();
  EXPECT_TRUE(std::filesystem::exists(manifestOf(root, 4)));
  EXPECT_EQ(ckpt.exit_code(), 0);
}

TEST(AsyncCheckpoint, AFailedLastWriteMakesTheExitCodeAFailure) {
  const std::string root = tempRoot() + "/failing-last";
  Job job;
  strata::CheckpointManager ckpt(job.model, job.opt, &job.sampler, asyncOptions(root));
  obstructShard(root, 1);
  job.train(1);
  testing::internal::CaptureStderr();
  ckpt.save(1, 0);
  const int code = ckpt.exit_code();  // waits for the write
  const std::string logged = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, strata::kExitFailed);
  EXPECT_NE(logged.find("found at the end of training"), std::string::npos) << logged;
}

TEST(AsyncCheckpoint, AnOptimizerWithoutASnapshotIsSavedSynchronously) {
  Job job([](std::vector<torch::Tensor> p) {
    return std::make_unique<torch::optim::LBFGS>(std::move(p), torch::optim::LBFGSOptions(0.1));
  });
  const std::string root = tempRoot() + "/lbfgs";
  strata::CheckpointManager ckpt(job.model, job.opt, &job.sampler, asyncOptions(root));
  EXPECT_FALSE(ckpt.async());
  ckpt.save(1, 0);  // complete on return
  EXPECT_TRUE(std::filesystem::exists(manifestOf(root, 1)));
  EXPECT_EQ(ckpt.stats().saves, 1);
  EXPECT_EQ(ckpt.stats().backgroundSaves, 0);
}

}  // namespace
