// SIGTERM/SIGINT handlers (runtime/signals.h): a signal becomes a stop request; the same
// signal repeated within a second (one Ctrl-C forwarded by several launchers) is the same
// request; asked again later, the process terminates the default way.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <thread>

#include "runtime/signals.h"
#include "runtime/stop.h"

namespace strata::runtime {
namespace {

TEST(StopSignals, SigtermBecomesAStopRequestAndARepeatWithinASecondIsTheSame) {
  uninstallStopSignalHandlers();
  resetStop();
  installStopSignalHandlers();
  ASSERT_TRUE(stopSignalHandlersInstalled());
  EXPECT_EQ(localStopCause(), StopCause::kNone);
  std::raise(SIGTERM);
  EXPECT_EQ(localStopCause(), StopCause::kSignal);
  EXPECT_EQ(stopSignalNumber(), SIGTERM);
  std::raise(SIGTERM);  // the same burst: still alive, still one request
  std::raise(SIGINT);   // another signal: its own first arrival, the first request stays
  EXPECT_EQ(stopSignalNumber(), SIGTERM);
  uninstallStopSignalHandlers();
  EXPECT_FALSE(stopSignalHandlersInstalled());
  resetStop();
}

TEST(StopSignalsDeathTest, SigintAgainAfterTheWindowTerminates) {
  EXPECT_EXIT(
      {
        uninstallStopSignalHandlers();
        installStopSignalHandlers();
        std::raise(SIGINT);
        std::this_thread::sleep_for(std::chrono::milliseconds(1100));
        std::raise(SIGINT);
        std::_Exit(0);  // not reached
      },
      ::testing::KilledBySignal(SIGINT), "");
}

TEST(StopSignals, DisabledByEnvironment) {
  uninstallStopSignalHandlers();
  setenv("STRATA_HANDLE_SIGNALS", "0", 1);
  installStopSignalHandlers();
  EXPECT_FALSE(stopSignalHandlersInstalled());
  unsetenv("STRATA_HANDLE_SIGNALS");
}

}  // namespace
}  // namespace strata::runtime
