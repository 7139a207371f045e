// A sharded optimizer state's checkpoint resumed on another data-parallel size.
//
//   dp_shard_resume write <root> [host]   (under mpirun, any size): 3 AdamW steps with sharded
//       optimizer state (with "host": host-shared parameters, in use from the second step),
//       a partial checkpoint at step 3, 3 more steps; rank 0 saves the final parameters to
//       <root>.expected.pt.
//   dp_shard_resume resume <root>   (under mpirun, another size): loads the checkpoint into a
//       sharded, a host-shared and an unsharded optimizer and trains steps 3..5 with them.
//       Checks: the three are bitwise equal; they match the uninterrupted run within 1e-9
//       (only the reduction order of steps 3..5 differs); the same resume without the
//       optimizer state does not (so the state was restored); the ranks' state bytes add up
//       to the unsharded state.
// Exits 0 on every rank when every check passed, 1 on every rank otherwise.
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "dp/dp_testing.h"
#include "strata/checkpoint.h"

namespace {

using namespace strata;
using namespace strata::testing;

constexpr int kSteps = 6;
constexpr int kCheckpointStep = 3;

torch::nn::Sequential makeNet() {
  torch::manual_seed(99);
  torch::nn::Sequential net(torch::nn::Linear(8, 13), torch::nn::Tanh(), torch::nn::Linear(13, 4));
  net->to(torch::kFloat64);
  return net;
}

struct Run {
  torch::nn::Sequential net = makeNet();
  DistributedModel model{net};
  DistributedOptimizer opt;
  explicit Run(bool shard, bool hostShared = false)
      : opt(torch::optim::AdamW(net->parameters(), torch::optim::AdamWOptions(0.02).weight_decay(0.05)), model,
            DistributedOptimizerOptions{shard ? 1 : 0, hostShared ? 1 : 0}) {}
  void train(int step) {
    auto [x, y] = globalBatch(step, torch::kFloat64);
    opt.zero_grad();
    model.backward(torch::mse_loss(model(localSlice(x)), localSlice(y)));
    opt.step();
  }
};

int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "[rank %d] FAILED: %s\n", strata::rank(), what.c_str());
  }
}

void write(const std::string& root, bool hostShared) {
  if (strata::rank() == 0) std::filesystem::remove_all(root);  // a previous run's checkpoint
  strata::world().barrier();
  Run run(true, hostShared);
  for (int step = 0; step < kCheckpointStep; ++step) run.train(step);
  check(run.opt.host_shared() == (hostShared && strata::size() > 1), "host-shared parameters in use when asked");
  SaveOptions so;
  so.partial = true;
  so.step = kCheckpointStep;
  strata::save(root, run.model, run.opt, so);
  for (int step = kCheckpointStep; step < kSteps; ++step) run.train(step);
  if (strata::rank() == 0) torch::save(snapshot(run.net->parameters()), root + ".expected.pt");
  strata::world().barrier();
}

void resume(const std::string& root) {
  std::vector<torch::Tensor> expected;
  torch::load(expected, root + ".expected.pt");
  Run sharded(true), hosted(true, true), plain(false), stateless(true);
  for (Run* run : {&sharded, &hosted, &plain, &stateless}) {
    const auto loaded = strata::load(root, run->model, run->opt);
    check(loaded.has_value() && loaded->step == kCheckpointStep, "checkpoint at step 3 loaded");
  }
  int64_t shardBytes = static_cast<int64_t>(sharded.opt.state_bytes());
  strata::world().allreduce(&shardBytes, &shardBytes, 1, DType::kInt64, ReduceOp::kSum);
  check(shardBytes == static_cast<int64_t>(plain.opt.state_bytes()) && shardBytes > 0,
        "restored shards add up to the whole state: " + std::to_string(shardBytes) + " vs " +
            std::to_string(plain.opt.state_bytes()));
  stateless.opt.optimizer().state().clear();
  for (int step = kCheckpointStep; step < kSteps; ++step)
    for (Run* run : {&sharded, &hosted, &plain, &stateless}) run->train(step);
  check(hosted.opt.host_shared() == (strata::size() > 1), "host-shared parameters in use after the resume");
  const auto s = sharded.net->parameters();
  const auto h = hosted.net->parameters();
  const auto p = plain.net->parameters();
  for (size_t i = 0; i < s.size(); ++i) {
    check(torch::equal(s[i], p[i]), "sharded == unsharded, parameter " + std::to_string(i));
    check(torch::equal(h[i], p[i]), "host-shared == unsharded, parameter " + std::to_string(i));
  }
  const double diff = maxRelativeDiff(s, expected);
  check(diff <= 1e-9, "resumed vs uninterrupted: max relative difference " + std::to_string(diff));
  const double statelessDiff = maxRelativeDiff(stateless.net->parameters(), expected);
  check(statelessDiff > 1e-6, "resuming without the optimizer state differs: " + std::to_string(statelessDiff));
  if (strata::rank() == 0)
    std::printf("resumed at %d rank(s): max relative difference %.3g (without optimizer state %.3g)\n",
                strata::size(), diff, statelessDiff);
}

}  // namespace

int main(int argc, char** argv) {
  strata::init(argc, argv);
  int failed = 0;
  try {
    const std::string mode = argc > 2 ? argv[1] : "";
    if (mode == "write") {
      write(argv[2], argc > 3 && std::string(argv[3]) == "host");
    } else if (mode == "resume") {
      resume(argv[2]);
    } else {
      std::fprintf(stderr, "usage: dp_shard_resume write <checkpoint root> [host] | resume <checkpoint root>\n");
      failures = 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] error: %s\n", strata::rank(), e.what());
    failures = 1;
  }
  failed = failures > 0 ? 1 : 0;
  strata::world().allreduce(&failed, &failed, 1, DType::kInt32, ReduceOp::kMax);
  strata::finalize();
  return failed;
}
