#include "collectives/flight_ticker.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

namespace strata::collectives::flight {

namespace detail {
TickerCell tickerCell;
}  // namespace detail

namespace {

constexpr int64_t kNsPerSecond = 1000000000;

int64_t monotonicNs() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * kNsPerSecond + ts.tv_nsec;
}

// The process's ticker. Allocated once and never destroyed: a process that exits while
// the thread runs must not run a destructor that joins it (or destroys a joinable thread).
struct TickerState {
  std::mutex mu;                        // everything but the atomics
  int references = 0;
  std::unique_ptr<std::thread> thread;  // null: no thread in this process
  bool startFailed = false;             // after a fork: do not retry on every reading
  bool atforkRegistered = false;
  std::atomic<bool> stop{false};
  // Written by the thread only (relaxed), read by tickerStats().
  std::atomic<uint64_t> ticks{0};
  std::atomic<int64_t> maxGapNs{0};
};

TickerState& tickerState() {
  static TickerState* s = new TickerState;
  return *s;
}

void tickerMain(TickerState* s) {
  pthread_setname_np(pthread_self(), "strata-ticker");
  const int64_t periodNs = std::chrono::nanoseconds(kTickerPeriod).count();
  int64_t last = static_cast<int64_t>(detail::tickerCell.ns.load(std::memory_order_relaxed));
  int64_t scheduled = last + periodNs;
  while (!s->stop.load(std::memory_order_acquire)) {
    const struct timespec wake {
      static_cast<time_t>(scheduled / kNsPerSecond), static_cast<long>(scheduled % kNsPerSecond)
    };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &wake, nullptr) == EINTR) {
    }
    const int64_t now = monotonicNs();
    detail::tickerCell.ns.store(static_cast<uint64_t>(now), std::memory_order_relaxed);
    if (now - last > s->maxGapNs.load(std::memory_order_relaxed))
      s->maxGapNs.store(now - last, std::memory_order_relaxed);
    s->ticks.store(s->ticks.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    last = now;
    scheduled = nextTickNs(scheduled, now, periodNs);
  }
}

// Under s.mu. The first reading is stored before the thread exists, so a reader never
// sees 0 once acquireTicker() returned. The thread starts with every signal blocked: a
// process-directed signal (SIGUSR2, SIGTERM) goes to a thread that handles it.
void startLocked(TickerState& s) {
  s.stop.store(false, std::memory_order_relaxed);
  s.ticks.store(0, std::memory_order_relaxed);
  s.maxGapNs.store(0, std::memory_order_relaxed);
  detail::tickerCell.ns.store(static_cast<uint64_t>(monotonicNs()), std::memory_order_relaxed);
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  try {
    s.thread = std::make_unique<std::thread>(tickerMain, &s);
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    detail::tickerCell.ns.store(0, std::memory_order_relaxed);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

void stopLocked(TickerState& s) {
  if (!s.thread) return;
  s.stop.store(true, std::memory_order_release);
  s.thread->join();  // within about a period: the thread only sleeps and stores
  s.thread.reset();
  detail::tickerCell.ns.store(0, std::memory_order_relaxed);
}

// fork(): the child has no ticker thread. Its copy of the std::thread is leaked (joining
// or destroying it would act on a thread of the parent) and the cell is cleared, so the
// child's first reading takes the slow path and starts a thread of its own. Only atomic
// stores and a mutex unlock run in the child (it may be about to exec).
void atforkPrepare() { tickerState().mu.lock(); }
void atforkParent() { tickerState().mu.unlock(); }
void atforkChild() {
  TickerState& s = tickerState();
  static_cast<void>(s.thread.release());
  s.startFailed = false;
  detail::tickerCell.ns.store(0, std::memory_order_relaxed);
  s.mu.unlock();
}

}  // namespace

int64_t nextTickNs(int64_t scheduledNs, int64_t nowNs, int64_t periodNs) {
  if (nowNs - scheduledNs >= periodNs) return nowNs + periodNs;
  return scheduledNs + periodNs;
}

void acquireTicker() {
  TickerState& s = tickerState();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.atforkRegistered) {
    pthread_atfork(atforkPrepare, atforkParent, atforkChild);
    s.atforkRegistered = true;
  }
  if (!s.thread) startLocked(s);
  ++s.references;
}

void releaseTicker() {
  TickerState& s = tickerState();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.references > 0) --s.references;
  if (s.references == 0) stopLocked(s);
}

TickerStats tickerStats() {
  TickerState& s = tickerState();
  std::lock_guard<std::mutex> lock(s.mu);
  TickerStats st;
  st.running = s.thread != nullptr;
  st.references = s.references;
  st.ticks = s.ticks.load(std::memory_order_relaxed);
  st.maxGapNs = s.maxGapNs.load(std::memory_order_relaxed);
  const uint64_t last = detail::tickerCell.ns.load(std::memory_order_relaxed);
  if (last != 0) st.lastGapNs = std::max<int64_t>(0, monotonicNs() - static_cast<int64_t>(last));
  clockid_t cpuClock;
  struct timespec ts {};
  if (s.thread && pthread_getcpuclockid(s.thread->native_handle(), &cpuClock) == 0 &&
      clock_gettime(cpuClock, &ts) == 0)
    st.cpuNs = int64_t{ts.tv_sec} * kNsPerSecond + ts.tv_nsec;
  return st;
}

uint64_t detail::tickerSlowNowNs() {
  TickerState& s = tickerState();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.references > 0 && !s.thread && !s.startFailed) {
      try {
        startLocked(s);
      } catch (const std::system_error&) {
        s.startFailed = true;  // every reading reads the clock itself: slower, still right
      }
    }
  }
  return static_cast<uint64_t>(monotonicNs());
}

}  // namespace strata::collectives::flight
