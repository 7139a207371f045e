// The flight recorder's "ticker" clock (Clock::kTicker, the default): one background thread
// per process ("strata-ticker") stores the monotonic clock (CLOCK_MONOTONIC, in
// nanoseconds: steady_clock's time base, which CLOCK_MONOTONIC_COARSE shares) into one
// cache line every period, so the recorder's hot path reads the time with one relaxed load
// instead of a vDSO clock_gettime (~2.5 ns a read on the bench host, two per collective:
// most of record + finish; bench/RESULTS.md).
//
// The period is a trade: every wake-up costs the thread 10-90 us of CPU on the (loaded)
// bench host, taken from whatever ran on that core, often a rank spinning in a collective:
// 1.2-1.5% of a core at 1 ms, 0.4-0.7% at 10 ms, 0.08-0.12% at the default 50 ms
// (bench/RESULTS.md). Readings are as coarse as the period.
//
// What a reading means: the time of the thread's last store, so it is never later than the
// truth and at most one gap between two stores earlier: the period plus however long the
// thread was kept off a core on a loaded machine. The thread keeps the largest gap it has seen (TickerStats::maxGapNs); a
// snapshot reports it as the clock's resolution, the bound on how early a recorded time
// can be. Readings never go backwards (one writer storing a monotonic clock).
//
// Lifetime: the first acquireTicker() starts the thread, the last releaseTicker() wakes,
// stops and joins it. A process that exits with the ticker running does not
// wait for it (its state is never destroyed, so no destructor joins a thread at exit). In
// the child of a fork() the thread does not exist: the child's first reading finds the
// cell cleared (by a pthread_atfork handler), reads the clock itself and starts a new
// thread when the child still holds references.
//
// Threading: every function is thread-safe. tickerNowNs() is lock-free and wait-free
// except for the first reading after a fork; the others take a mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace strata::collectives::flight {

// The ticker's default period (flight_recorder.tick_ms; measured in bench/RESULTS.md,
// TickerStats::cpuNs) and the range setTickerPeriod accepts.
inline constexpr std::chrono::milliseconds kDefaultTickerPeriod{50};
inline constexpr std::chrono::microseconds kMinTickerPeriod{100};
inline constexpr std::chrono::microseconds kMaxTickerPeriod{1000000};

namespace detail {
// The last reading, alone on its cache line (it is read on every collective and written
// every period); 0 while no ticker runs in this process.
struct alignas(64) TickerCell {
  std::atomic<uint64_t> ns{0};
};
extern TickerCell tickerCell;
// The clock read directly, (re)starting the thread when this process holds references
// (the first reading after a fork). Out of line: it is the rare path.
uint64_t tickerSlowNowNs();
}  // namespace detail

// CLOCK_MONOTONIC nanoseconds as of the ticker's last store. Valid between
// acquireTicker() and the matching releaseTicker().
__attribute__((always_inline)) inline uint64_t tickerNowNs() {
  const uint64_t ns = detail::tickerCell.ns.load(std::memory_order_relaxed);
  if (__builtin_expect(ns != 0, 1)) return ns;
  return detail::tickerSlowNowNs();
}

// One reference each; the thread runs while any is held. acquireTicker returns once the
// first reading is stored. Never throws out of release; acquire throws std::system_error
// when no thread can be started.
void acquireTicker();
void releaseTicker();

// Process-wide, from the next tick on (clamped to [kMinTickerPeriod, kMaxTickerPeriod]).
void setTickerPeriod(std::chrono::microseconds period);
std::chrono::microseconds tickerPeriod();

struct TickerStats {
  bool running = false;
  int references = 0;
  uint64_t ticks = 0;      // stores since the thread started
  int64_t maxGapNs = 0;    // largest gap between two stores since the thread started
  int64_t lastGapNs = 0;   // now - the last store (how stale a reading is at this moment)
  int64_t cpuNs = 0;       // the thread's CPU time (0 when not running)
};
TickerStats tickerStats();

// Pure: when the ticker wakes next. `scheduledNs` is the wake-up it slept until, `nowNs`
// when it woke. On time: one period after the schedule (no drift). Late by a period or
// more: one period from now (no burst of catch-up wake-ups after a stall).
int64_t nextTickNs(int64_t scheduledNs, int64_t nowNs, int64_t periodNs);

}  // namespace strata::collectives::flight
