#include "collectives/flight_ticker.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <condition_variable>
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

// One run of the thread, with what wakes it early to stop. A new one per start: in a
// forked child the old one is leaked, because its condition variable may still count the
// parent's waiter.
struct TickerThread {
  std::mutex mu;
  std::condition_variable wake;
  bool stop = false;  // under mu
  std::thread thread;
};

// The process's ticker. Allocated once and never destroyed: a process that exits while
// the thread runs must not run a destructor that joins it (or destroys a joinable thread).
struct TickerState {
  std::mutex mu;  // everything but the atomics
  int references = 0;
  std::unique_ptr<TickerThread> thread;  // null: no thread in this process
  bool startFailed = false;              // after a fork: do not retry on every reading
  bool atforkRegistered = false;
  std::atomic<int64_t> periodNs{std::chrono::nanoseconds(kDefaultTickerPeriod).count()};
  // Written by the thread only (relaxed), read by tickerStats().
  std::atomic<uint64_t> ticks{0};
  std::atomic<int64_t> maxGapNs{0};
};

TickerState& tickerState() {
  static TickerState* s = new TickerState;
  return *s;
}

// Sleeps until the next tick (steady_clock is CLOCK_MONOTONIC: libstdc++ waits with
// pthread_cond_clockwait on it), stores the time, until stopped.
void tickerMain(TickerState* s, TickerThread* t) {
  pthread_setname_np(pthread_self(), "strata-ticker");
  int64_t last = static_cast<int64_t>(detail::tickerCell.ns.load(std::memory_order_relaxed));
  int64_t scheduled = last + s->periodNs.load(std::memory_order_relaxed);
  std::unique_lock<std::mutex> lock(t->mu);
  while (!t->stop) {
    t->wake.wait_until(lock, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(scheduled)));
    const int64_t now = monotonicNs();
    if (t->stop || now < scheduled) continue;  // stopped, or woken early for nothing
    detail::tickerCell.ns.store(static_cast<uint64_t>(now), std::memory_order_relaxed);
    if (now - last > s->maxGapNs.load(std::memory_order_relaxed))
      s->maxGapNs.store(now - last, std::memory_order_relaxed);
    s->ticks.store(s->ticks.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    last = now;
    scheduled = nextTickNs(scheduled, now, s->periodNs.load(std::memory_order_relaxed));
  }
}

// Under s.mu. The first reading is stored before the thread exists, so a reader never
// sees 0 once acquireTicker() returned. The thread starts with every signal blocked: a
// process-directed signal (SIGUSR2, SIGTERM) goes to a thread that handles it.
void startLocked(TickerState& s) {
  s.ticks.store(0, std::memory_order_relaxed);
  s.maxGapNs.store(0, std::memory_order_relaxed);
  detail::tickerCell.ns.store(static_cast<uint64_t>(monotonicNs()), std::memory_order_relaxed);
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  try {
    auto t = std::make_unique<TickerThread>();
    t->thread = std::thread(tickerMain, &s, t.get());
    s.thread = std::move(t);
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    detail::tickerCell.ns.store(0, std::memory_order_relaxed);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

void stopLocked(TickerState& s) {
  if (!s.thread) return;
  {
    std::lock_guard<std::mutex> lock(s.thread->mu);
    s.thread->stop = true;
  }
  s.thread->wake.notify_one();
  s.thread->thread.join();  // at once: the thread only sleeps and stores
  s.thread.reset();
  detail::tickerCell.ns.store(0, std::memory_order_relaxed);
}

// fork(): the child has no ticker thread. Its copy of the TickerThread is leaked (joining
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

void setTickerPeriod(std::chrono::microseconds period) {
  period = std::clamp(period, kMinTickerPeriod, kMaxTickerPeriod);
  tickerState().periodNs.store(std::chrono::nanoseconds(period).count(), std::memory_order_relaxed);
}

std::chrono::microseconds tickerPeriod() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::nanoseconds(tickerState().periodNs.load(std::memory_order_relaxed)));
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
  if (s.thread && pthread_getcpuclockid(s.thread->thread.native_handle(), &cpuClock) == 0 &&
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
  // The new thread's first store, not a later clock read: the next reading (the cell) must
  // not be earlier than this one.
  const uint64_t cell = detail::tickerCell.ns.load(std::memory_order_relaxed);
  return cell != 0 ? cell : static_cast<uint64_t>(monotonicNs());
}

}  // namespace strata::collectives::flight
