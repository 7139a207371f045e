// Work's run time and CPU time: the CPU time counts only what the running thread computed,
// so a wait (or a core shared with another busy thread) shows as run time without CPU time.
#include <gtest/gtest.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "strata/work.h"

namespace strata {
namespace {

using std::chrono::milliseconds;

std::chrono::nanoseconds threadCpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// Computes until this thread has used `cpu` of CPU time.
void burn(std::chrono::nanoseconds cpu) {
  const auto until = threadCpu() + cpu;
  volatile uint64_t sink = 0;
  while (threadCpu() < until)
    for (int i = 0; i < 1000; ++i) sink = sink + static_cast<uint64_t>(i);
}

TEST(WorkTime, CpuTimeCountsComputationNotSleep) {
  Work busy, sleeping;
  std::thread([&] {
    busy.markStarted();
    burn(milliseconds(40));
    busy.finish(nullptr);
    sleeping.markStarted();
    std::this_thread::sleep_for(milliseconds(60));
    sleeping.finish(nullptr);
  }).join();
  EXPECT_GE(busy.cpuTime(), milliseconds(40));
  EXPECT_GE(busy.runTime(), busy.cpuTime());
  EXPECT_GE(sleeping.runTime(), milliseconds(60));
  EXPECT_LT(sleeping.cpuTime(), milliseconds(20)) << "a sleep is not CPU time";
}

TEST(WorkTime, FinishedOnAnotherThreadHasNoCpuTime) {
  Work w;
  std::thread([&] {
    w.markStarted();
    burn(milliseconds(10));
  }).join();
  w.finish(nullptr);  // this thread's CPU clock says nothing about the other's
  EXPECT_EQ(w.cpuTime().count(), 0);
  EXPECT_GE(w.runTime(), milliseconds(10));
}

TEST(WorkTime, NeverStartedHasNeither) {
  Work w;
  w.finish(nullptr);
  EXPECT_EQ(w.runTime().count(), 0);
  EXPECT_EQ(w.cpuTime().count(), 0);
}

// The executor learns whether the caller computes or waits: wait() counts itself while it
// blocks (the communication thread sleeps instead of spinning while nobody waits).
TEST(WorkWaits, WaitCountsItselfWhileItBlocks) {
  auto waiters = std::make_shared<std::atomic<int>>(0);
  Work w;
  w.countWaitsIn(waiters);
  std::thread waiter([&] { w.wait(); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (waiters->load() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  EXPECT_EQ(waiters->load(), 1);
  w.finish(nullptr);
  waiter.join();
  EXPECT_EQ(waiters->load(), 0);
  w.wait();  // already done: counted and uncounted at once
  EXPECT_EQ(waiters->load(), 0);
  {
    WaitCount inline1(waiters.get()), inline2(waiters.get());
    EXPECT_EQ(waiters->load(), 2);
  }
  EXPECT_EQ(waiters->load(), 0);
  WaitCount none(nullptr);  // no counter: nothing to count
}

}  // namespace
}  // namespace strata
