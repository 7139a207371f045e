#include "runtime/signals.h"

#include <atomic>
#include <csignal>
#include <cstdint>
#include <ctime>
#include <mutex>

#include "core/env.h"
#include "core/logging.h"
#include "runtime/stop.h"

namespace strata::runtime {
namespace {

// SIGUSR1 too: Open MPI's mpirun forwards it to every rank (it kills the job on SIGTERM,
// docs/exit_status.md), and batch systems send it ahead of a time limit.
constexpr int kSignals[] = {SIGTERM, SIGINT, SIGUSR1};
constexpr int kNumSignals = sizeof(kSignals) / sizeof(kSignals[0]);
// One Ctrl-C reaches a rank several times within milliseconds (the terminal's process group,
// mpirun forwarding it, `strata run` forwarding it): repeats this soon count as the same one.
constexpr int64_t kRepeatWindowMs = 1000;

std::mutex installMutex;
bool installed = false;
struct sigaction previous[kNumSignals];
std::atomic<int64_t> firstArrivalMs[kNumSignals] = {};  // per signal; 0: not received

int slotOf(int signo) {
  for (int i = 0; i < kNumSignals; ++i)
    if (kSignals[i] == signo) return i;
  return 0;
}

int64_t monotonicMs() {  // clock_gettime is async-signal-safe
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000 + 1;  // never 0
}

void onStopSignal(int signo) {
  const int slot = slotOf(signo);
  const int64_t now = monotonicMs();
  int64_t first = 0;
  if (firstArrivalMs[slot].compare_exchange_strong(first, now)) {
    requestStopFromSignal(signo);
    return;
  }
  if (now - first < kRepeatWindowMs) return;
  // Asked again later: the default action (terminate), as the user means it.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(signo, &dfl, nullptr);
  raise(signo);
}

}  // namespace

void installStopSignalHandlers() {
  std::lock_guard<std::mutex> lock(installMutex);
  if (installed) return;
  if (env::getInt("STRATA_HANDLE_SIGNALS", 1, 0, 1) == 0) return;
  for (int signo : kSignals) {
    struct sigaction action {};
    action.sa_handler = onStopSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // blocking reads and writes carry on; the loop checks later
    sigaction(signo, &action, &previous[slotOf(signo)]);
    firstArrivalMs[slotOf(signo)] = 0;
  }
  installed = true;
  STRATA_LOG(kDebug, kInit, "SIGTERM/SIGINT/SIGUSR1: finish the step, checkpoint, exit (a second signal terminates)");
}

void uninstallStopSignalHandlers() {
  std::lock_guard<std::mutex> lock(installMutex);
  if (!installed) return;
  for (int signo : kSignals) sigaction(signo, &previous[slotOf(signo)], nullptr);
  installed = false;
}

bool stopSignalHandlersInstalled() {
  std::lock_guard<std::mutex> lock(installMutex);
  return installed;
}

}  // namespace strata::runtime
