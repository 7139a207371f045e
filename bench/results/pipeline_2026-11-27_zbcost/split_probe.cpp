#include <torch/torch.h>
#include <torch/csrc/autograd/autograd.h>
#include <chrono>
#include <cstdio>
#include <time.h>
struct Clock { using time_point = double; static double now() { timespec ts; clock_gettime(getenv("WALL") ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &ts); return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6; } };
static double since(double t) { return Clock::now() - t; }
double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
int main(int argc, char** argv) {
  torch::set_num_threads(1);
  const int64_t W = argc > 1 ? atoi(argv[1]) : 1536, rows = argc > 2 ? atoi(argv[2]) : 16;
  const int pairs = 4, m = 8, rounds = argc > 3 ? atoi(argv[3]) : 9;
  torch::manual_seed(0);
  std::vector<torch::nn::AnyModule> layers;
  std::vector<torch::Tensor> params;
  for (int i = 0; i < pairs; ++i) {
    torch::nn::Linear l(W, W);
    for (auto& p : l->parameters()) params.push_back(p);
    layers.emplace_back(l);
    layers.emplace_back(torch::nn::ReLU());
  }
  auto x = torch::randn({rows * m, W}), g = torch::randn({rows * m, W});
  std::vector<double> fullF, fullB, splitF, splitB, splitW;
  for (int r = 0; r < rounds; ++r) {
    // full
    { double f = 0, b = 0;
      for (int mb = 0; mb < m; ++mb) {
        auto in = x.narrow(0, mb * rows, rows).detach().requires_grad_(true);
        auto t = Clock::now(); torch::Tensor y = in;
        for (auto& l : layers) y = l.forward<torch::Tensor>(y);
        f += since(t); t = Clock::now();
        torch::autograd::backward({y}, {g.narrow(0, mb * rows, rows)});
        b += since(t);
      }
      fullF.push_back(f); fullB.push_back(b); }
    // split (executor's way)
    { double f = 0, b = 0, w = 0;
      for (int mb = 0; mb < m; ++mb) {
        auto in = x.narrow(0, mb * rows, rows).detach().requires_grad_(true);
        auto t = Clock::now(); torch::Tensor y = in;
        std::vector<torch::Tensor> ins, outs;
        for (size_t k = 0; k < layers.size(); ++k) {
          if (k > 0) { y = y.detach(); y.requires_grad_(true); }
          ins.push_back(y); y = layers[k].forward<torch::Tensor>(y); outs.push_back(y);
        }
        f += since(t); t = Clock::now();
        std::vector<torch::Tensor> grads(outs.size());
        grads.back() = g.narrow(0, mb * rows, rows);
        for (size_t k = outs.size(); k-- > 0;) {
          auto gi = torch::autograd::grad({outs[k]}, {ins[k]}, {grads[k]}, true, false, true)[0];
          if (k > 0) grads[k - 1] = gi;
        }
        b += since(t); t = Clock::now();
        torch::autograd::backward(outs, grads, false, false, params);
        w += since(t);
      }
      splitF.push_back(f); splitB.push_back(b); splitW.push_back(w); }
  }
  std::printf("W=%lld rows=%lld m=%d, per step (ms, median of %d): full F %.2f BW %.2f | split F %.2f B %.2f W %.2f B+W %.2f\n",
              (long long)W, (long long)rows, m, rounds, med(fullF), med(fullB), med(splitF), med(splitB), med(splitW),
              med(splitB) + med(splitW));
}
