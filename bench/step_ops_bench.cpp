// The single-thread cost of each operation of one step of scaling_bench's mlp25m on its
// 4096x4096 layer at batch 32 (bench/run_step_ops.sh runs it alone and on both cores at once,
// to show which operations slow down when both cores train).
//
//   step_ops_bench [--reps 40]
//
// Prints one line per operation: `op <name> ms=<mean ms per call>`.
//   fwd, bwd_input      the forward and input-gradient GEMMs (read the 64 MiB weight)
//   bwd_weight_into     the weight-gradient GEMM into an existing buffer
//   bwd_weight_new      the same GEMM into a new tensor (what autograd does)
//   zero, add, copy     64 MiB: zeroing a bucket, adding a gradient into it, copying one in
//   sgd                 p -= lr * g over 64 MiB
//   avg2_plain          out = (a + b) / 2 over 64 MiB, a plain loop (ordinary stores)
//   avg2_reducer        the same through the collectives' kernel (reduceMany, what a 2-rank
//                       reduce-scatter runs; non-temporal stores at this size)
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

#include "collectives/reduce_kernels.h"

namespace {

// The reference for avg2_reducer: the same arithmetic with ordinary stores.
void averageTwoPlain(float* out, const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = (a[i] + b[i]) / 2.0f;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 40;
  CLI::App app{"per-operation cost of one mlp25m layer step"};
  app.add_option("--reps", reps, "timed calls per operation")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(1);
  torch::manual_seed(0);
  torch::NoGradGuard noGrad;
  const int64_t width = 4096, batch = 32;
  auto weight = torch::randn({width, width}), bucket = torch::randn({width, width});
  auto grad = torch::randn({width, width});
  auto x = torch::randn({batch, width}), gradOut = torch::randn({batch, width});
  const size_t n = static_cast<size_t>(width * width);
  const std::pair<const char*, std::function<void()>> ops[] = {
      {"fwd", [&] { auto r = x.mm(weight.t()); }},
      {"bwd_input", [&] { auto r = gradOut.mm(weight); }},
      {"bwd_weight_into", [&] { torch::mm_out(bucket, gradOut.t(), x); }},
      {"bwd_weight_new", [&] { auto r = gradOut.t().mm(x); }},
      {"zero", [&] { bucket.zero_(); }},
      {"add", [&] { bucket.add_(grad); }},
      {"copy", [&] { bucket.copy_(grad); }},
      {"sgd", [&] { weight.add_(grad, -1e-9); }},
      {"avg2_plain",
       [&] { averageTwoPlain(bucket.data_ptr<float>(), grad.data_ptr<float>(), weight.data_ptr<float>(), n); }},
      {"avg2_reducer",
       [&] {
         const void* srcs[] = {grad.data_ptr<float>(), weight.data_ptr<float>()};
         strata::collectives::reduceMany(strata::ReduceOp::kAvg, strata::DType::kFloat32, bucket.data_ptr<float>(),
                                         srcs, 2, n, 2);
       }},
  };
  for (const auto& [name, op] : ops) {
    op();
    op();  // warm: pages touched, allocator primed
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) op();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / reps;
    std::printf("op %s ms=%.3f\n", name, ms);
  }
  return 0;
}
