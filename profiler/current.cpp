// The process-wide current session and the user ranges that record into it.
//
// A range may end on one thread while another thread stops the session. To make that safe
// without a lock on the hot path, every access to the current session happens inside a
// Pin: it counts itself in gPinned, then loads gCurrent. clearCurrent() first swaps
// gCurrent to null, then waits for gPinned to drain. With sequentially consistent atomics
// either the pin sees null or clearCurrent sees the pin, so no pin ever holds a session
// whose stop() has passed clearCurrent(). A pin lives for a few hundred nanoseconds.
#include <thread>

#include "core/logging.h"
#include "profiler/session.h"
#include "strata/profiler.h"

namespace strata::profiler {

namespace detail {
std::atomic<bool> gRangesOn{false};
}  // namespace detail

namespace {

std::atomic<Session*> gCurrent{nullptr};
std::atomic<int> gPinned{0};
// How long clearCurrent waits for in-flight ranges: far above a pin's lifetime; reaching
// it means a thread was descheduled mid-range, and waiting longer would stall shutdown.
constexpr auto kUnpinTimeout = std::chrono::seconds(1);

class Pin {
 public:
  Pin() noexcept {
    gPinned.fetch_add(1);
    session_ = gCurrent.load();
  }
  ~Pin() { gPinned.fetch_sub(1); }
  Pin(const Pin&) = delete;
  Pin& operator=(const Pin&) = delete;
  Session* get() const { return session_; }

 private:
  Session* session_;
};

}  // namespace

Session* current() noexcept { return gCurrent.load(); }

namespace detail {

void setCurrent(Session* session) noexcept {
  gCurrent.store(session);
  gRangesOn.store(session != nullptr && session->timelineActive());
}

void clearCurrent(Session* session) noexcept {
  Session* expected = session;
  if (!gCurrent.compare_exchange_strong(expected, nullptr)) return;
  gRangesOn.store(false);
  const auto deadline = std::chrono::steady_clock::now() + kUnpinTimeout;
  while (gPinned.load() != 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      STRATA_LOG(kWarn, kProf, "profiler: a range is still recording after ",
                 kUnpinTimeout.count(), " s at session stop; stopping anyway");
      return;
    }
    std::this_thread::yield();
  }
}

void setRangesOn(Session* session, bool on) noexcept {
  if (gCurrent.load() == session) gRangesOn.store(on, std::memory_order_relaxed);
}

int64_t rangeBegin() noexcept {
  const Pin pin;
  Session* s = pin.get();
  return s != nullptr && s->timelineActive() ? s->nowUs() : -1;
}

void rangeEnd(const char* name, int64_t startUs) noexcept {
  const Pin pin;
  if (Session* s = pin.get()) {
    s->recordSlice(name, phases::kUserRange, userTrackOfThisThread(), startUs,
                   s->nowUs() - startUs);
  }
}

}  // namespace detail

// --- ScopedSlice -----------------------------------------------------------------------

ScopedSlice::ScopedSlice(const char* name, const char* phase, Track track) noexcept
    : session_(nullptr),
      name_(name),
      phase_(phase),
      track_(track),
      startUs_(detail::gRangesOn.load(std::memory_order_relaxed) ? detail::rangeBegin() : -1) {}

ScopedSlice::ScopedSlice(Session* session, const char* name, const char* phase,
                         Track track) noexcept
    : session_(session),
      name_(name),
      phase_(phase),
      track_(track),
      startUs_(session != nullptr && session->timelineActive() ? session->nowUs() : -1) {}

ScopedSlice::~ScopedSlice() {
  if (startUs_ < 0) return;
  if (session_ != nullptr) {
    session_->recordSlice(name_, phase_, track_, startUs_, session_->nowUs() - startUs_);
    return;
  }
  const Pin pin;
  if (Session* s = pin.get()) s->recordSlice(name_, phase_, track_, startUs_, s->nowUs() - startUs_);
}

}  // namespace strata::profiler
