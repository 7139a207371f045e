// Save/load round trips of every part of the training state in one process: parameters,
// buffers, optimizer state, step and epoch counters, the CPU generator, the sampler position
// (also through a DataLoader's copy), the model's step counter and the debugger's counters;
// files a plain libtorch program loads; and the fallback from a corrupted newest checkpoint.
// The tests that save run twice: synchronous saves (strata::save) and background writes
// (CheckpointManager with async on); both must give the same state back.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "debugger/torch_hook.h"
#include "strata/checkpoint.h"
#include "strata/strata.h"
#include "test_job.h"

namespace {

using namespace strata_test;  // NOLINT: the shared test job

class StrataEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    fs::remove_all(tempRoot());
    strata::InitOptions o;
    o.configJson = "{\"output_dir\": \"" + tempRoot() + "/run\", \"profiler\": {\"disable_profiler\": true}, " +
                   "\"debugger\": {\"collections\": [{\"name\": \"losses\", \"save_interval\": 1}]}}";
    strata::init(o);
  }
  void TearDown() override {
    strata::finalize();
    fs::remove_all(tempRoot());
  }
};
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new StrataEnvironment);

class RoundTrip : public ::testing::TestWithParam<Mode> {
 protected:
  std::string root(const std::string& name) const { return tempRoot() + "/" + name + "-" + modeName({GetParam(), 0}); }
};

void roundTrip(Mode mode, bool partial, const std::string& root) {
  Job job;
  job.train(7);  // crosses an epoch: 40 samples, batch 8
  Saver saver(mode, root, job, partial);
  const std::string dir = saver.save(7, 1);
  const Snapshot saved = snapshot(job);
  EXPECT_TRUE(fs::exists(dir + "/" + (partial ? "rank-00000.pt" : "model.pt")));

  job.train(3);  // everything moves on
  torch::rand({5});
  job.model.set_steps_taken(1000);
  EXPECT_FALSE(torch::equal(saved.tensors[0], job.net->parameters()[0]));

  strata::LoadOptions lo;
  lo.sampler = &job.sampler;
  const auto loaded = strata::load(root, job.model, job.opt, lo);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->path, dir);
  EXPECT_EQ(loaded->step, 7);
  EXPECT_EQ(loaded->epoch, 1);
  EXPECT_TRUE(loaded->sameLayout);
  expectSame(saved, snapshot(job));
}

TEST_P(RoundTrip, EveryPartOfTheStateFull) { roundTrip(GetParam(), false, root("full")); }
TEST_P(RoundTrip, EveryPartOfTheStatePartial) { roundTrip(GetParam(), true, root("partial")); }

INSTANTIATE_TEST_SUITE_P(Checkpoint, RoundTrip, ::testing::Values(Mode::kSync, Mode::kAsync), modeName);

// The debugger's counters are restored when a new run resumes (before its first step).
TEST(RoundTripSync, DebuggerAndProfilerCountersContinueInTheResumedRun) {
  const std::string root = tempRoot() + "/counters";
  int64_t savedDebuggerStep = 0;
  {
    Job job;
    const int64_t before = strata::debugger::activeHook()->core().globalStep();  // -1 when run alone
    job.train(4);
    savedDebuggerStep = strata::debugger::activeHook()->core().globalStep();
    EXPECT_EQ(savedDebuggerStep, before + 4);
    strata::SaveOptions so;
    so.step = 4;
    strata::save(root, job.model, job.opt, so);
  }
  const std::string config = strata::configJson();
  strata::finalize();  // a new run in the same process: a fresh debugger hook
  strata::InitOptions o;
  o.configJson = config;
  strata::init(o);
  Job job;
  EXPECT_EQ(strata::debugger::activeHook()->core().globalStep(), -1);
  ASSERT_TRUE(strata::load(root, job.model, job.opt));
  EXPECT_EQ(strata::debugger::activeHook()->core().globalStep(), savedDebuggerStep);
  EXPECT_EQ(job.model.steps_taken(), 4);  // the profiler's step numbers
  job.train(1);
  EXPECT_EQ(strata::debugger::activeHook()->core().globalStep(), savedDebuggerStep + 1);
  EXPECT_EQ(job.model.steps_taken(), 5);
}

TEST_P(RoundTrip, FullCheckpointLoadsInAPlainLibtorchProgram) {
  Job job;
  job.train(2);
  Saver saver(GetParam(), root("plain"), job);
  const std::string dir = saver.save(2);
  auto fresh = makeNet();
  torch::load(fresh, dir + "/model.pt");  // what a single-process libtorch user writes
  const auto a = job.net->named_parameters(true), b = fresh->named_parameters(true);
  for (const auto& p : a) EXPECT_TRUE(torch::equal(p.value(), b[p.key()])) << p.key();
  const auto ab = job.net->named_buffers(true), bb = fresh->named_buffers(true);
  for (const auto& p : ab) EXPECT_TRUE(torch::equal(p.value(), bb[p.key()])) << p.key();
}

TEST(RoundTripSync, LoadModuleTakesALibtorchSavedModule) {
  auto source = makeNet();
  const std::string file = tempRoot() + "/torch-saved.pt";
  fs::create_directories(tempRoot());
  torch::save(source, file);
  auto target = makeNet();
  strata::load_module(file, *target);
  const auto a = source->named_parameters(true), b = target->named_parameters(true);
  for (const auto& p : a) EXPECT_TRUE(torch::equal(p.value(), b[p.key()])) << p.key();
}

TEST_P(RoundTrip, CorruptedNewestCheckpointFallsBackToThePreviousOne) {
  Job job;
  const std::string root = this->root("corrupt");
  Saver saver(GetParam(), root, job);
  job.train(3);
  saver.save(3);
  const Snapshot atThree = snapshot(job);
  job.train(2);
  const std::string newest = saver.save(5);
  {
    std::fstream f(newest + "/model.pt", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    const char byte = static_cast<char>(f.get());
    f.seekp(100);
    f.put(static_cast<char>(~byte));  // one byte flipped: same size, wrong checksum
  }
  const auto loaded = strata::load(root, job.model, job.opt);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->step, 3);
  for (size_t i = 0; i < job.net->parameters().size(); ++i)
    EXPECT_TRUE(torch::equal(atThree.tensors[i], job.net->parameters()[i]));
}

TEST_P(RoundTrip, KeepsTheNewestK) {
  Job job;
  const std::string root = this->root("keep");
  Saver saver(GetParam(), root, job, /*partial=*/false, /*keep=*/2);
  for (int64_t step : {1, 2, 3, 4}) saver.save(step);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(root)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"step-000000000003", "step-000000000004"}));
}

// The DataLoader holds a copy of the sampler: checkpoints of the user's copy see the loader's
// position, and a loader built after load() continues mid-epoch.
TEST(Sampler, DataLoaderResumesMidEpochFromACheckpointOfItsSampler) {
  const int64_t n = 20, batch = 3;
  auto dataset =
      torch::data::datasets::TensorDataset(torch::arange(n)).map(torch::data::transforms::Stack<torch::data::TensorExample>());
  auto collect = [&](strata::DistributedSampler& sampler, int epochs, int stopAfter) {
    auto loader = torch::data::make_data_loader(dataset, sampler, torch::data::DataLoaderOptions().batch_size(batch));
    std::vector<int64_t> seen;
    int batches = 0;
    for (int e = 0; e < epochs; ++e)
      for (auto& b : *loader) {
        for (int64_t i = 0; i < b.data.size(0); ++i) seen.push_back(b.data[i].item<int64_t>());
        if (++batches == stopAfter) return seen;
      }
    return seen;
  };
  strata::DistributedSampler::Options o;
  o.seed = 11;
  strata::DistributedSampler reference(n, o);
  const std::vector<int64_t> all = collect(reference, 3, -1);

  strata::DistributedSampler first(n, o);
  const std::vector<int64_t> head = collect(first, 3, 9);  // stops in the second epoch
  EXPECT_EQ(first.epoch(), 1u);
  torch::serialize::OutputArchive out;
  first.save(out);
  std::ostringstream bytes;
  out.save_to(bytes);

  strata::DistributedSampler second(n, o);
  torch::serialize::InputArchive in;
  std::istringstream input(bytes.str());
  in.load_from(input);
  second.load(in);
  std::vector<int64_t> rest = collect(second, 2, -1);  // the rest of epoch 1, then epoch 2
  std::vector<int64_t> joined = head;
  joined.insert(joined.end(), rest.begin(), rest.end());
  EXPECT_EQ(joined, all);
}

}  // namespace
