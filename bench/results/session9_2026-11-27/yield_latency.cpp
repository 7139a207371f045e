#include <chrono>
#include <cstdio>
#include <sched.h>
int main() {
  long h[6] = {0}; double worst = 0;
  const int n = 2000000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    auto a = std::chrono::steady_clock::now();
    sched_yield();
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count();
    h[us < 1 ? 0 : us < 2 ? 1 : us < 10 ? 2 : us < 100 ? 3 : us < 1000 ? 4 : 5]++;
    if (us > worst) worst = us;
  }
  double tot = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("%d yields in %.2f s (%.2f us each): <1us %ld <2 %ld <10 %ld <100 %ld <1000 %ld >=1ms %ld worst %.0f us\n", n, tot, tot / n * 1e6, h[0], h[1], h[2], h[3], h[4], h[5], worst);
}
