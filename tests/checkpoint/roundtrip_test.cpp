// Save/load round trips of every part of the training state in one process: parameters,
// buffers, optimizer state, step and epoch counters, the CPU generator, the sampler position
// (also through a DataLoader's copy), the model's step counter and the debugger's counters;
// files a plain libtorch program loads; and the fallback from a corrupted newest checkpoint.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "debugger/torch_hook.h"
#include "strata/checkpoint.h"
#include "strata/strata.h"

namespace {

namespace fs = std::filesystem;

std::string tempRoot() {
  static const std::string root = (fs::temp_directory_path() / ("strata-ckpt-rt-" + std::to_string(getpid()))).string();
  return root;
}

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

torch::nn::Sequential makeNet() {
  namespace nn = torch::nn;
  return nn::Sequential(nn::Linear(6, 12), nn::BatchNorm1d(12), nn::ReLU(), nn::Dropout(0.3), nn::Linear(12, 3),
                        nn::LogSoftmax(1));
}

struct Job {
  torch::nn::Sequential net = makeNet();
  strata::DistributedModel model{net};
  strata::DistributedOptimizer opt{torch::optim::Adam(model.parameters(), torch::optim::AdamOptions(0.01)), model};
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
      opt.zero_grad();
      model.step(x.index_select(0, t), y.index_select(0, t),
                 [](strata::DistributedModel& m, const torch::Tensor& xb, const torch::Tensor& yb) {
                   auto loss = torch::nll_loss(m(xb), yb);
                   m.backward(loss);
                   return loss;
                 });
      opt.step();
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

Snapshot snapshot(Job& job) {
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

void expectSame(const Snapshot& a, const Snapshot& b) {
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

void roundTrip(bool partial, const std::string& name) {
  Job job;
  job.train(7);  // crosses an epoch: 40 samples, batch 8
  const std::string root = tempRoot() + "/" + name;
  strata::SaveOptions so;
  so.partial = partial;
  so.step = 7;
  so.epoch = 1;
  so.sampler = &job.sampler;
  const std::string dir = strata::save(root, job.model, job.opt, so);
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

TEST(RoundTrip, EveryPartOfTheStateFull) { roundTrip(false, "full"); }
TEST(RoundTrip, EveryPartOfTheStatePartial) { roundTrip(true, "partial"); }

// The debugger's counters are restored when a new run resumes (before its first step).
TEST(RoundTrip, DebuggerAndProfilerCountersContinueInTheResumedRun) {
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

TEST(RoundTrip, FullCheckpointLoadsInAPlainLibtorchProgram) {
  Job job;
  job.train(2);
  strata::SaveOptions so;
  so.step = 2;
  const std::string dir = strata::save(tempRoot() + "/plain", job.model, job.opt, so);
  auto fresh = makeNet();
  torch::load(fresh, dir + "/model.pt");  // what a single-process libtorch user writes
  const auto a = job.net->named_parameters(true), b = fresh->named_parameters(true);
  for (const auto& p : a) EXPECT_TRUE(torch::equal(p.value(), b[p.key()])) << p.key();
  const auto ab = job.net->named_buffers(true), bb = fresh->named_buffers(true);
  for (const auto& p : ab) EXPECT_TRUE(torch::equal(p.value(), bb[p.key()])) << p.key();
}

TEST(RoundTrip, LoadModuleTakesALibtorchSavedModule) {
  auto source = makeNet();
  const std::string file = tempRoot() + "/torch-saved.pt";
  fs::create_directories(tempRoot());
  torch::save(source, file);
  auto target = makeNet();
  strata::load_module(file, *target);
  const auto a = source->named_parameters(true), b = target->named_parameters(true);
  for (const auto& p : a) EXPECT_TRUE(torch::equal(p.value(), b[p.key()])) << p.key();
}

TEST(RoundTrip, CorruptedNewestCheckpointFallsBackToThePreviousOne) {
  Job job;
  const std::string root = tempRoot() + "/corrupt";
  strata::SaveOptions so;
  job.train(3);
  so.step = 3;
  strata::save(root, job.model, job.opt, so);
  const Snapshot atThree = snapshot(job);
  job.train(2);
  so.step = 5;
  const std::string newest = strata::save(root, job.model, job.opt, so);
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

TEST(RoundTrip, KeepsTheNewestK) {
  Job job;
  const std::string root = tempRoot() + "/keep";
  strata::SaveOptions so;
  so.keep = 2;
  for (int64_t step : {1, 2, 3, 4}) {
    so.step = step;
    strata::save(root, job.model, job.opt, so);
  }
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
