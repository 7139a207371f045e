// The doorbell (transport/shm/doorbell.h), the cross-process futex that shared-memory waits
// sleep on: a ring wakes a sleeper at once, a sleep after the word moved returns at once,
// and a sleep nobody rings lasts until its limit.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "transport/shm/doorbell.h"

namespace strata::transport::shm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(Doorbell, ASleeperWakesWhenRungNotAtItsLimit) {
  Doorbell bell;
  std::atomic<bool> ready{false};
  Clock::duration slept{};
  std::thread sleeper([&] {
    const auto start = Clock::now();
    for (;;) {
      const uint32_t seen = doorbellValue(bell);
      if (ready.load()) break;
      sleepOnDoorbell(bell, seen, std::chrono::microseconds(30s));
    }
    slept = Clock::now() - start;
  });
  std::this_thread::sleep_for(50ms);
  ready.store(true);
  ringDoorbell(bell);
  sleeper.join();
  EXPECT_LT(slept, 15s) << "the ring did not wake the sleeper: it slept until its limit";
  EXPECT_EQ(bell.sleepers.load(), 0u);
}

TEST(Doorbell, ASleepAfterTheWordMovedReturnsAtOnceAndTheLimitEndsOne) {
  Doorbell bell;
  const uint32_t seen = doorbellValue(bell);
  ringDoorbell(bell);  // nobody sleeps yet: no wakeup to lose, the word moved
  auto start = Clock::now();
  sleepOnDoorbell(bell, seen, std::chrono::microseconds(30s));
  EXPECT_LT(Clock::now() - start, 15s);
  start = Clock::now();
  sleepOnDoorbell(bell, doorbellValue(bell), std::chrono::microseconds(20ms));
  EXPECT_GE(Clock::now() - start, 15ms) << "a sleep without a ring lasts until its limit";
}

}  // namespace
}  // namespace strata::transport::shm
