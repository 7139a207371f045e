// The flight recorder's ticker clock (collectives/flight_ticker.h): its schedule (pure), the
// tick -> Unix conversion, the thread's lifetime (advances while held, stops when released,
// survives a fork, does not hold up exit), and a recorder on it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <thread>

#include "collectives/flight_recorder.h"
#include "collectives/flight_ticker.h"

namespace strata::collectives::flight {
namespace {

// Waits are bounded so a broken ticker fails instead of hanging; the bound is generous
// (a loaded machine), not a performance threshold.
constexpr auto kPatience = std::chrono::seconds(20);

uint64_t monotonicNs() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// True once tickerNowNs() moved past `after`.
bool advancesPast(uint64_t after) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (std::chrono::steady_clock::now() < deadline) {
    if (tickerNowNs() > after) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST(FlightTicker, NextTickKeepsTheScheduleAndSkipsAfterAStall) {
  constexpr int64_t kPeriod = 1000;
  EXPECT_EQ(nextTickNs(5000, 5000, kPeriod), 6000);   // on time
  EXPECT_EQ(nextTickNs(5000, 5070, kPeriod), 6000);   // a little late: no drift
  EXPECT_EQ(nextTickNs(5000, 5999, kPeriod), 6000);
  EXPECT_EQ(nextTickNs(5000, 6000, kPeriod), 7000);   // a whole period late: from now
  EXPECT_EQ(nextTickNs(5000, 90000, kPeriod), 91000); // a long stall: no catch-up burst
}

// Ticks are CLOCK_MONOTONIC nanoseconds: the dump's conversion is an offset, and a tick
// read before the snapshot's "now" is never converted to a time after the dump.
TEST(FlightTicker, TicksConvertToUnixTimeByOffset) {
  ClockInfo c;
  c.source = "ticker";
  c.nowTicks = 7000000000;
  c.nowUnixNs = 1764000000000000000;
  EXPECT_EQ(c.unixNs(7000000000), c.nowUnixNs);
  EXPECT_EQ(c.unixNs(6999000000), c.nowUnixNs - 1000000);
  EXPECT_EQ(c.unixNs(4500000000), c.nowUnixNs - 2500000000);
  EXPECT_EQ(c.unixNs(0), 0);  // not reached
}

TEST(FlightTicker, AdvancesWhileHeldAndStopsWhenReleased) {
  acquireTicker();
  acquireTicker();
  const uint64_t first = tickerNowNs();
  EXPECT_NE(first, 0u);
  EXPECT_LE(first, monotonicNs());
  EXPECT_TRUE(advancesPast(first));
  TickerStats st = tickerStats();
  EXPECT_TRUE(st.running);
  EXPECT_GE(st.references, 2);
  EXPECT_GE(st.ticks, 1u);
  EXPECT_GE(st.maxGapNs, std::chrono::nanoseconds(tickerPeriod()).count());  // it slept a whole period
  releaseTicker();  // one reference left: still running
  EXPECT_TRUE(tickerStats().running);
  releaseTicker();
  st = tickerStats();
  EXPECT_FALSE(st.running);
  EXPECT_EQ(st.references, 0);
  // Restartable: a later recorder gets a new thread.
  acquireTicker();
  EXPECT_TRUE(advancesPast(tickerNowNs()));
  releaseTicker();
  EXPECT_FALSE(tickerStats().running);
}

TEST(FlightTicker, PeriodIsClampedAndTakesEffect) {
  setTickerPeriod(std::chrono::microseconds(1));
  EXPECT_EQ(tickerPeriod(), kMinTickerPeriod);
  setTickerPeriod(std::chrono::hours(1));
  EXPECT_EQ(tickerPeriod(), kMaxTickerPeriod);
  setTickerPeriod(std::chrono::milliseconds(2));
  EXPECT_EQ(tickerPeriod(), std::chrono::milliseconds(2));
  acquireTicker();
  EXPECT_TRUE(advancesPast(tickerNowNs()));
  releaseTicker();
  setTickerPeriod(kDefaultTickerPeriod);
  EXPECT_EQ(tickerPeriod(), kDefaultTickerPeriod);
}

// Readings never go backwards and are never later than the clock itself.
TEST(FlightTicker, ReadingsAreMonotonicAndNotAhead) {
  acquireTicker();
  uint64_t previous = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  while (std::chrono::steady_clock::now() < until) {
    const uint64_t reading = tickerNowNs();
    const uint64_t clock = monotonicNs();
    ASSERT_GE(reading, previous);
    ASSERT_LE(reading, clock);
    previous = reading;
  }
  releaseTicker();
}

// Runs `child` in a forked process and returns its exit status (-1: it had to be killed:
// it hung).
int statusOfChild(const std::function<int()>& child) {
  const pid_t pid = fork();
  if (pid == 0) _exit(child());
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The child of a fork has no ticker thread: its first reading starts one, its readings
// advance, and releasing the last reference joins the child's thread (not the parent's).
TEST(FlightTicker, ForkedChildTicksOnItsOwnAndStops) {
  acquireTicker();
  const uint64_t beforeFork = tickerNowNs();
  const int status = statusOfChild([beforeFork] {
    const uint64_t first = tickerNowNs();  // the slow path: the clock, and a new thread
    if (first < beforeFork) return 2;
    if (!advancesPast(first)) return 3;
    if (!tickerStats().running) return 4;
    releaseTicker();
    return tickerStats().running ? 5 : 0;
  });
  EXPECT_EQ(status, 0) << "2: went back, 3: did not advance, 4/5: thread state, -1: hung";
  EXPECT_TRUE(advancesPast(tickerNowNs()));  // the parent's ticker is untouched
  releaseTicker();
}

// A process that exits with the ticker running (a recorder never destroyed) is not held up.
TEST(FlightTicker, ExitWithTheTickerRunningDoesNotHang) {
  const int status = statusOfChild([] {
    acquireTicker();
    if (!advancesPast(tickerNowNs())) return 3;
    std::exit(0);  // static destructors and atexit handlers run; the thread is not joined
  });
  EXPECT_EQ(status, 0) << "-1: hung";
}

// A recorder on the ticker: times never go backwards, and none is after the dump's "now"
// or before the recorder existed by more than the clock's reported resolution.
TEST(FlightTicker, RecorderTimesAreMonotonicAndPlausible) {
  const int64_t beforeUnixNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
  Recorder rec(64, Clock::kTicker);
  const uint32_t lane = rec.acquireLane();
  OpInfo info;
  info.op = Op::kAllReduce;
  info.dtype = DType::kFloat32;
  for (uint64_t i = 1; i <= 40; ++i) {
    info.seq = i;
    rec.finish(rec.record(info, State::kStarted, lane), true);
    if (i % 8 == 0) {
      ASSERT_TRUE(advancesPast(tickerNowNs()));  // the next batch is later
    }
  }
  const Snapshot snap = rec.snapshot();
  EXPECT_EQ(snap.clock.source, "ticker");
  EXPECT_GE(snap.clock.resolutionNs, std::chrono::nanoseconds(tickerPeriod()).count());
  ASSERT_EQ(snap.entries.size(), 40u);
  int64_t previous = 0;
  for (const Entry& e : snap.entries) {
    const int64_t start = snap.clock.unixNs(e.startTicks);
    const int64_t end = snap.clock.unixNs(e.endTicks);
    EXPECT_EQ(e.enqueueTicks, e.startTicks);
    EXPECT_GE(start, previous) << "seq " << e.info.seq;
    EXPECT_GE(end, start) << "seq " << e.info.seq;
    EXPECT_LE(end, snap.clock.nowUnixNs) << "seq " << e.info.seq;
    EXPECT_GE(start, beforeUnixNs - snap.clock.resolutionNs) << "seq " << e.info.seq;
    previous = end;
  }
  // The waits between batches moved the ticker: the last record is later than the first.
  EXPECT_GT(snap.entries.back().endTicks, snap.entries.front().startTicks);
}

}  // namespace
}  // namespace strata::collectives::flight
