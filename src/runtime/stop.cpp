#include "runtime/stop.h"

#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>

#include "core/errors.h"
#include "core/logging.h"
#include "strata/group.h"
#include "strata/rules.h"
#include "strata/runtime.h"

namespace strata::runtime {
namespace {

std::atomic<int> signalCause{0};  // the signal number, set from a handler
std::atomic<int> requestCause{static_cast<int>(StopCause::kNone)};
std::mutex textMutex;
std::string requestText;
// The cause every rank agreed on at the last should_stop() that returned true.
std::atomic<int> agreedCause{static_cast<int>(StopCause::kNone)};

}  // namespace

const char* stopCauseName(StopCause cause) {
  switch (cause) {
    case StopCause::kNone: return "none";
    case StopCause::kUser: return "user";
    case StopCause::kRule: return "rule";
    case StopCause::kSignal: return "signal";
  }
  return "none";
}

void requestStopFromSignal(int signo) {
  int expected = 0;
  signalCause.compare_exchange_strong(expected, signo);
}

void requestStop(StopCause cause, const std::string& why) {
  std::lock_guard<std::mutex> lock(textMutex);
  int expected = static_cast<int>(StopCause::kNone);
  if (requestCause.compare_exchange_strong(expected, static_cast<int>(cause))) requestText = why;
}

StopCause localStopCause() {
  if (signalCause.load() != 0) return StopCause::kSignal;
  auto cause = static_cast<StopCause>(requestCause.load());
  if (cause != StopCause::kNone) return cause;
  if (rules::StopSignal::global().requested()) return StopCause::kRule;
  return StopCause::kNone;
}

int stopSignalNumber() { return signalCause.load(); }

void resetStop() {
  signalCause = 0;
  requestCause = static_cast<int>(StopCause::kNone);
  agreedCause = static_cast<int>(StopCause::kNone);
  std::lock_guard<std::mutex> lock(textMutex);
  requestText.clear();
}

}  // namespace strata::runtime

namespace strata {

bool should_stop() {
  using runtime::StopCause;
  int32_t cause = static_cast<int32_t>(runtime::localStopCause());
  if (isInitialized() && size() > 1) {
    // Every rank calls this at the same step boundary; the strongest cause wins everywhere.
    world().allreduce(&cause, &cause, 1, DType::kInt32, ReduceOp::kMax);
  }
  if (cause != 0) {
    int expected = 0;
    if (runtime::agreedCause.compare_exchange_strong(expected, cause)) {
      STRATA_LOG(kInfo, kInit, "stopping at this step boundary: ", stop_reason());
    }
  }
  return cause != 0;
}

std::string stop_reason() {
  using runtime::StopCause;
  auto cause = static_cast<StopCause>(runtime::agreedCause.load());
  if (cause == StopCause::kNone) cause = runtime::localStopCause();
  switch (cause) {
    case StopCause::kNone: return "";
    case StopCause::kSignal: {
      int signo = runtime::stopSignalNumber();
      if (signo == 0) return "a signal on another rank";
      const char* name = strsignal(signo);
      return std::string("signal ") + (name ? name : std::to_string(signo));
    }
    case StopCause::kRule: {
      auto& s = rules::StopSignal::global();
      if (s.requested()) return "rule " + s.rule() + ": " + s.reason();
      std::lock_guard<std::mutex> lock(runtime::textMutex);
      return runtime::requestText.empty() ? "a rule on another rank" : runtime::requestText;
    }
    case StopCause::kUser: {
      std::lock_guard<std::mutex> lock(runtime::textMutex);
      return runtime::requestText.empty() ? "requested on another rank" : runtime::requestText;
    }
  }
  return "";
}

}  // namespace strata
