#include "runtime/signals.h"

#include <atomic>
#include <csignal>
#include <mutex>

#include "core/env.h"
#include "core/logging.h"
#include "runtime/stop.h"

namespace strata::runtime {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT};

std::mutex installMutex;
bool installed = false;
struct sigaction previous[2];
std::atomic<int> received[2] = {0, 0};  // per signal: how many arrived

int slotOf(int signo) { return signo == SIGTERM ? 0 : 1; }

void onStopSignal(int signo) {
  const int count = ++received[slotOf(signo)];
  if (count > 1) {
    // Second time: the default action (terminate), as the user asked twice.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(signo, &dfl, nullptr);
    raise(signo);
    return;
  }
  requestStopFromSignal(signo);
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
    received[slotOf(signo)] = 0;
  }
  installed = true;
  STRATA_LOG(kDebug, kInit, "SIGTERM/SIGINT: finish the step, checkpoint, exit (a second signal terminates)");
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
