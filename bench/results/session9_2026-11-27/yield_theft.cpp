#include <atomic>
#include <chrono>
#include <cstdio>
#include <sched.h>
#include <thread>
#include <pthread.h>
std::atomic<bool> stop{false};
double work() {
  auto t = std::chrono::steady_clock::now();
  volatile double x = 0; for (long i = 0; i < 300000000L; ++i) x = x + 1e-9 * i;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
int main(int argc, char** argv) {
  cpu_set_t s; CPU_ZERO(&s); CPU_SET(0, &s); sched_setaffinity(0, sizeof s, &s);
  printf("alone %.3f s\n", work());
  long yields = 0;
  std::thread y([&] { while (!stop) { sched_yield(); ++yields; } });
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  double w = work();
  stop = true; y.join();
  printf("with yielder %.3f s (yields %ld)\n", w, yields);
  timespec ts{};
  clockid_t c; 
  printf("alone %.3f s\n", work());
}
