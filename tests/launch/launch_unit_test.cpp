// The pieces of docs/exit_status.md that need no launcher: SIGUSR1 is a stop request like
// SIGTERM, an uncaught ConfigError exits 78 (other uncaught exceptions still abort),
// exit_code_for maps errors to codes, and `strata run` picks SIGUSR1 for Open MPI's launchers.
#include <gtest/gtest.h>

#include <csignal>
#include <stdexcept>

#include "checkpoint/restart_policy.h"
#include "core/errors.h"
#include "runtime/exit_status.h"
#include "runtime/signals.h"
#include "runtime/stop.h"
#include "strata/exit_codes.h"

namespace strata {
namespace {

TEST(StopSignals, SigusrOneIsAStopRequestLikeSigterm) {
  runtime::uninstallStopSignalHandlers();
  runtime::resetStop();
  runtime::installStopSignalHandlers();
  std::raise(SIGUSR1);
  EXPECT_EQ(runtime::localStopCause(), runtime::StopCause::kSignal);
  EXPECT_EQ(runtime::stopSignalNumber(), SIGUSR1);
  runtime::uninstallStopSignalHandlers();
  runtime::resetStop();
}

TEST(ExitCodeFor, ConfigErrorsAreNotFailures) {
  EXPECT_EQ(exit_code_for(ConfigError("bad key")), kExitConfigError);
  EXPECT_EQ(exit_code_for(NetworkError("peer died")), kExitFailed);
  EXPECT_EQ(exit_code_for(TimeoutError("slow")), kExitFailed);
  EXPECT_EQ(exit_code_for(std::runtime_error("other")), kExitFailed);
  EXPECT_EQ(kExitConfigError, 78);
  EXPECT_EQ(kExitStopped, 75);
}

TEST(UncaughtConfigErrorDeathTest, ExitsWithTheConfigErrorCode) {
  EXPECT_EXIT(
      {
        runtime::installConfigErrorExit();
        throw ConfigError("job.json: unknown key \"chekpoint\"");
      },
      ::testing::ExitedWithCode(kExitConfigError), "configuration error.*chekpoint");
}

TEST(UncaughtConfigErrorDeathTest, OtherExceptionsStillAbort) {
  EXPECT_EXIT(
      {
        runtime::installConfigErrorExit();
        throw NetworkError("rank 1 died");
      },
      ::testing::KilledBySignal(SIGABRT), "");
}

TEST(StopSignalFor, Sigusr1ForOpenMpiLaunchersOnly) {
  using checkpoint::stopSignalFor;
  EXPECT_EQ(stopSignalFor("auto", "mpirun"), SIGUSR1);
  EXPECT_EQ(stopSignalFor("auto", "/usr/bin/mpiexec"), SIGUSR1);
  EXPECT_EQ(stopSignalFor("auto", "orterun"), SIGUSR1);
  EXPECT_EQ(stopSignalFor("auto", "./train"), 0);
  EXPECT_EQ(stopSignalFor("auto", "/opt/mpirun-wrapper.sh"), 0);
  EXPECT_EQ(stopSignalFor("TERM", "mpirun"), SIGTERM);
  EXPECT_EQ(stopSignalFor("SIGINT", "x"), SIGINT);
  EXPECT_EQ(stopSignalFor("USR1", "x"), SIGUSR1);
  EXPECT_EQ(stopSignalFor("KILL", "x"), -1);
}

}  // namespace
}  // namespace strata
