// The ticker loop alone (clock_nanosleep + store), its thread CPU time and schedstat per period.
// Built with: g++ -O2 -pthread standalone_tick_cost.cpp; run: ./a.out PERIOD_US SECONDS
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
std::atomic<unsigned long> cell;
std::atomic<bool> stop;
long ns(clockid_t c) { timespec t{}; clock_gettime(c, &t); return t.tv_sec * 1000000000L + t.tv_nsec; }
int main(int argc, char** argv) {
  long period = atol(argv[1]) * 1000;  // argv[1] in us
  double secs = argc > 2 ? atof(argv[2]) : 3;
  long cpu0 = 0, cpu = 0, ticks = 0; std::string s0, s1; long tid = 0;
  std::thread t([&] {
    tid = syscall(SYS_gettid);
    std::string path = "/proc/self/task/" + std::to_string(tid) + "/schedstat";
    std::getline(std::ifstream(path), s0);
    cpu0 = ns(CLOCK_THREAD_CPUTIME_ID);
    long next = ns(CLOCK_MONOTONIC) + period;
    while (!stop.load()) {
      timespec w{next / 1000000000L, next % 1000000000L};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &w, nullptr);
      long now = ns(CLOCK_MONOTONIC);
      cell.store(now, std::memory_order_relaxed);
      ++ticks;
      next = (now - next >= period) ? now + period : next + period;
    }
    cpu = ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    std::getline(std::ifstream(path), s1);
  });
  long w0 = ns(CLOCK_MONOTONIC);
  timespec s{(long)secs, (long)((secs - (long)secs) * 1e9)};
  nanosleep(&s, nullptr);
  stop = true; t.join();
  double wall = (ns(CLOCK_MONOTONIC) - w0) * 1e-9;
  printf("period %ld us: %.1f us CPU per s (%.4f%% of a core), %.2f us per wake, %.0f wakes/s; schedstat %s -> %s\n", period/1000, cpu * 1e-3 / wall,
         cpu * 1e-7 / wall, cpu * 1e-3 / ticks, ticks / wall, s0.c_str(), s1.c_str());
}
