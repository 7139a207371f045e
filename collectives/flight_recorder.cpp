#include "collectives/flight_recorder.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "core/logging.h"

namespace strata::collectives::flight {
namespace {

// Failures kept for later dumps: the first ones explain a run; later ones are echoes.
constexpr size_t kMaxFailures = 64;
// The TSC rate is measured between the recorder's creation and a snapshot; a shorter
// interval than this is stretched (by sleeping) so the rate is good to ~0.1%.
constexpr std::chrono::milliseconds kMinCalibration{20};
// A reader retries a slot caught mid-write this often, then leaves the record out.
constexpr int kReadAttempts = 4;

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t unixNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The TSC counts at a constant rate on every core only with both flags.
bool invariantTsc() {
#if defined(__x86_64__)
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    line += ' ';
    return line.find(" constant_tsc ") != std::string::npos && line.find(" nonstop_tsc ") != std::string::npos;
  }
#endif
  return false;
}

// The kernel's vDSO clock_gettime (what glibc's calls), or null where there is none.
using ClockGettimeFn = int (*)(clockid_t, struct timespec*);
ClockGettimeFn vdsoClockGettime() {
  void* vdso = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (vdso == nullptr) return nullptr;
  void* fn = dlsym(vdso, "__vdso_clock_gettime");
  if (fn == nullptr) return nullptr;
  const ClockGettimeFn direct = reinterpret_cast<ClockGettimeFn>(fn);
  struct timespec ts {};
  return direct(CLOCK_MONOTONIC_COARSE, &ts) == 0 ? direct : nullptr;  // trusted only once it answers
}

size_t ringSizeFor(size_t capacity) {
  size_t n = 1;
  while (n < capacity) n <<= 1;
  return n;
}

}  // namespace

const char* opName(Op op) {
  switch (op) {
    case Op::kAllReduce: return "allreduce";
    case Op::kBroadcast: return "broadcast";
    case Op::kAllGather: return "allgather";
    case Op::kReduceScatter: return "reduce_scatter";
    case Op::kBarrier: return "barrier";
    case Op::kSend: return "send";
    case Op::kRecv: return "recv";
    case Op::kAllocateShared: return "allocate_shared";
    case Op::kReduceScatterShared:
      return "reduce_scatter_shared";
  }
  return "?";
}

const char* stateName(State state) {
  switch (state) {
    case State::kEnqueued: return "enqueued";
    case State::kStarted: return "started";
    case State::kCompleted: return "completed";
    case State::kFailed: return "failed";
  }
  return "?";
}

int64_t ClockInfo::unixNs(uint64_t ticks) const {
  if (ticks == 0) return 0;
  const double agoNs = static_cast<double>(static_cast<int64_t>(nowTicks - ticks)) / ticksPerNs;
  return nowUnixNs - static_cast<int64_t>(agoNs);
}

Recorder::Recorder(size_t capacity, Clock clock)
    : capacity_(capacity < 1 ? 1 : capacity), mask_(ringSizeFor(capacity_) - 1), laneTaken_(kMaxLanes + 1, false) {
  ownedRings_.push_back(std::make_unique<Ring>(mask_ + 1));
  lanes_[0].store(ownedRings_.back().get(), std::memory_order_release);
  laneTaken_[0] = true;  // the shared lane is never handed out
  if (clock == Clock::kPrecise) source_ = invariantTsc() ? Source::kTsc : Source::kSteady;
  if (clock == Clock::kTicker) {
    try {
      acquireTicker();
      source_ = Source::kTicker;
    } catch (const std::exception& e) {
      // A clock thread is not worth failing a job for: the coarse clock tells the same time.
      STRATA_LOG(kWarn, kColl, "flight recorder: no ticker thread (", e.what(), "), using the coarse clock");
    }
  }
  static const bool vdsoResolved = [] {
    if (const ClockGettimeFn direct = vdsoClockGettime()) coarseClockGettime_.store(direct, std::memory_order_relaxed);
    return true;
  }();
  (void)vdsoResolved;
  anchorSteadyNs_ = steadyNs();
  anchorTicks_ = nowTicks();
}

Recorder::~Recorder() {
  if (source_ == Source::kTicker) releaseTicker();
}

uint32_t Recorder::acquireLane() {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint32_t lane = 1; lane <= kMaxLanes; ++lane) {
    if (laneTaken_[lane]) continue;
    if (lanes_[lane].load(std::memory_order_relaxed) == nullptr) {
      ownedRings_.push_back(std::make_unique<Ring>(mask_ + 1));
      lanes_[lane].store(ownedRings_.back().get(), std::memory_order_release);
    }
    laneTaken_[lane] = true;
    return lane;
  }
  return 0;
}

void Recorder::releaseLane(uint32_t lane) {
  if (lane == 0 || lane > kMaxLanes) return;
  std::lock_guard<std::mutex> lock(mu_);
  laneTaken_[lane] = false;
}

std::atomic<Recorder::ClockGettime> Recorder::coarseClockGettime_{&::clock_gettime};

uint64_t Recorder::preciseTicks() const {
#if defined(__x86_64__)
  if (source_ == Source::kTsc) return __rdtsc();
#endif
  return static_cast<uint64_t>(steadyNs());
}

uint32_t Recorder::registerGroup(std::string name, std::vector<int> worldRanks, int groupRank) {
  std::lock_guard<std::mutex> lock(mu_);
  groups_.push_back(GroupInfo{std::move(name), std::move(worldRanks), groupRank});
  return static_cast<uint32_t>(groups_.size() - 1);
}

// A state change is made by the thread running the operation, so only a writer of a much
// later record (after the ring went round) can race it; the version check makes that
// writer's record win, except in the nanoseconds between the check and the first store,
// where the later record may get this one's state or time. Readers never see a torn slot.
bool Recorder::start(Ticket ticket, uint64_t seq) {
  Slot* s = ticket.slot;
  if (s == nullptr || s->version.load(std::memory_order_relaxed) != 2 * ticket.id) return false;
  const uint64_t now = nowTicks();
  s->version.store(2 * ticket.id - 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s->seq.store(seq, std::memory_order_relaxed);
  s->state.store(static_cast<uint8_t>(State::kStarted), std::memory_order_relaxed);
  s->startTicks.store(now, std::memory_order_relaxed);
  s->version.store(2 * ticket.id, std::memory_order_release);
  return true;
}

void Recorder::setFailureHandler(FailureHandler handler) {
  std::lock_guard<std::mutex> lock(mu_);
  handler_ = std::move(handler);
}

void Recorder::reportFailure(FailureEvent event) noexcept {
  try {
    FailureHandler handler;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (failures_.size() < kMaxFailures) failures_.push_back(event);
      handler = handler_;
    }
    if (handler) handler(event);
  } catch (const std::exception& e) {
    // The failure being reported is the error that matters; this one only loses a dump.
    STRATA_LOG(kWarn, kColl, "flight recorder: reporting a failure failed: ", e.what());
  } catch (...) {
    STRATA_LOG(kWarn, kColl, "flight recorder: reporting a failure failed");
  }
}

bool Recorder::readSlot(const Slot& s, Entry* out) const {
  for (int attempt = 0; attempt < kReadAttempts; ++attempt) {
    const uint64_t v1 = s.version.load(std::memory_order_acquire);
    if (v1 == 0) return false;
    if (v1 & 1) {
      std::this_thread::yield();
      continue;
    }
    const uint64_t packed = s.packed.load(std::memory_order_relaxed);
    Entry e;
    e.id = v1 / 2;
    e.info.group = static_cast<uint32_t>(packed >> 32);
    e.info.op = static_cast<Op>((packed >> 16) & 0xff);
    e.info.dtype = static_cast<DType>((packed >> 8) & 0xff);
    e.info.reduceOp = static_cast<ReduceOp>(packed & 0xff);
    e.state = static_cast<State>(s.state.load(std::memory_order_relaxed));
    e.info.peer = static_cast<int32_t>(s.peer.load(std::memory_order_relaxed));
    e.info.seq = s.seq.load(std::memory_order_relaxed);
    e.info.count = s.count.load(std::memory_order_relaxed);
    e.info.numBytes = s.numBytes.load(std::memory_order_relaxed);
    e.info.tag = s.tag.load(std::memory_order_relaxed);
    e.enqueueTicks = s.enqueueTicks.load(std::memory_order_relaxed);
    e.startTicks = s.startTicks.load(std::memory_order_relaxed);
    e.endTicks = s.endTicks.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.version.load(std::memory_order_relaxed) == v1) {
      *out = e;
      return true;
    }
  }
  return false;
}

ClockInfo Recorder::clockNow() const {
  ClockInfo c;
  const bool tsc = source_ == Source::kTsc;
  c.source = source_ == Source::kTicker ? "ticker" : tsc ? "tsc" : source_ == Source::kCoarse ? "coarse" : "steady_clock";
  if (source_ == Source::kCoarse) {
    struct timespec res {};
    clock_getres(CLOCK_MONOTONIC_COARSE, &res);
    c.resolutionNs = int64_t{res.tv_sec} * 1000000000 + res.tv_nsec;
  }
  if (source_ == Source::kTicker) {
    const TickerStats ticker = tickerStats();
    c.resolutionNs = std::max({std::chrono::nanoseconds(tickerPeriod()).count(), ticker.maxGapNs, ticker.lastGapNs});
  }
  int64_t elapsed = steadyNs() - anchorSteadyNs_;
  const int64_t minNs = std::chrono::nanoseconds(kMinCalibration).count();
  if (tsc && elapsed < minNs) std::this_thread::sleep_for(std::chrono::nanoseconds(minNs - elapsed));
  c.nowSteadyNs = steadyNs();
  // The ticker's ticks are CLOCK_MONOTONIC (steady_clock's) nanoseconds: "now" is the clock
  // itself, not the ticker's possibly late cell, so a late record converts to its (early)
  // reading and never to a time after the dump.
  c.nowTicks = source_ == Source::kTicker ? static_cast<uint64_t>(c.nowSteadyNs) : nowTicks();
  c.nowUnixNs = unixNs();
  elapsed = c.nowSteadyNs - anchorSteadyNs_;
  if (tsc && elapsed > 0) c.ticksPerNs = static_cast<double>(c.nowTicks - anchorTicks_) / static_cast<double>(elapsed);
  return c;
}

Snapshot Recorder::snapshot() const {
  Snapshot snap;
  snap.capacity = capacity_;
  snap.clock = clockNow();
  for (uint32_t lane = 0; lane <= kMaxLanes; ++lane) {
    const Ring* ring = lanes_[lane].load(std::memory_order_acquire);
    if (ring == nullptr) continue;
    const uint64_t last = ring->next.load(std::memory_order_acquire);
    snap.recorded += last;
    snap.wrapped = snap.wrapped || last > capacity_;
    const uint64_t first = last > capacity_ ? last - capacity_ + 1 : 1;
    for (uint64_t id = first; id <= last; ++id) {
      Entry e;
      if (readSlot(ring->slots[(id - 1) & mask_], &e) && e.id == id) {
        e.lane = lane;
        snap.entries.push_back(e);
      }
    }
  }
  // One history: by enqueue time, each lane's records kept in their order on equal times.
  std::stable_sort(snap.entries.begin(), snap.entries.end(),
                   [](const Entry& a, const Entry& b) { return a.enqueueTicks < b.enqueueTicks; });
  std::lock_guard<std::mutex> lock(mu_);
  snap.groups = groups_;
  snap.failures = failures_;
  return snap;
}

}  // namespace strata::collectives::flight
