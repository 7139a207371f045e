// Peak memory of a LayerList model (tests/pp/pipeline_memory_e2e.sh runs it in one process
// and as a pipeline of 2 ranks): 8 layers of 1536 x 1536 trained 2 steps with AdamW (about
// 300 MB of parameters, gradients and optimizer state in one process). Every rank prints
//   rank=<r> baseline_kb=<RSS before the model> peak_kb=<peak RSS> predicted_bytes=<plan> held_bytes=<held>
// where held counts its parameters, gradients and AdamW's two moments after the steps.
#include <sys/resource.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "strata/strata.h"
#include "testing/e2e_training.h"

namespace {

constexpr int64_t kWidth = 1536;
constexpr int kLayers = 8;
constexpr int64_t kBatch = 8;

int64_t currentRssKb() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int64_t peakRssKb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

int64_t heldBytes(strata::DistributedModel& model, torch::optim::Optimizer& optimizer) {
  int64_t bytes = 0;
  for (const auto& p : model.parameters()) bytes += static_cast<int64_t>(p.nbytes() + p.grad().nbytes());
  for (const auto& item : optimizer.state()) {
    const auto& s = static_cast<const torch::optim::AdamWParamState&>(*item.second);
    bytes += static_cast<int64_t>(s.exp_avg().nbytes() + s.exp_avg_sq().nbytes());
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  strata::init(argc, argv);
  const int64_t baseline = currentRssKb();
  strata::LayerList list;
  for (int i = 0; i < kLayers; ++i) list.add<torch::nn::Linear>("fc" + std::to_string(i), kWidth, kWidth);
  torch::manual_seed(1);
  const torch::Tensor x = torch::randn({kBatch, kWidth}), y = torch::randn({kBatch, kWidth});
  strata::DistributedModel model(list, x);
  strata::DistributedOptimizer opt(torch::optim::AdamW(model.parameters(), 1e-3), model);
  for (int step = 0; step < 2; ++step) strata::testing::trainStep(model, opt, x, y, strata::testing::Loss::kMse);
  const int64_t predicted = model.model_parallel() ? model.pipeline_stats().predictedStaticBytes : -1;
  std::printf("rank=%d baseline_kb=%lld peak_kb=%lld predicted_bytes=%lld held_bytes=%lld\n", strata::rank(),
              static_cast<long long>(baseline), static_cast<long long>(peakRssKb()), static_cast<long long>(predicted),
              static_cast<long long>(heldBytes(model, opt.optimizer())));
  std::fflush(stdout);
  strata::finalize();
  return 0;
}
