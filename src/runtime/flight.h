// The runtime's side of the flight recorder (collectives/flight_recorder.h): one recorder
// per process, shared by every group, and its dumps, <output_dir>/flight/rank-<r>.json:
//   * on a failure (timeout, mismatch, dead peer, other error) the failing thread writes it
//     before the error leaves the collective;
//   * on SIGUSR2 (`kill -USR2 <pid>`): the handler only writes a byte to a pipe; the
//     "strata-flight" thread writes the dump;
//   * at finalize, when flight_recorder.dump_on_finalize (STRATA_FLIGHT_DUMP_ON_FINALIZE=1).
// Dumps are atomic (a temporary file renamed over the old one) and serialised; a dump that
// fails is logged and never replaces the error being reported.
//
// Threading: create/start/stop from the runtime's init/finalize thread; dumpFlightRecorder
// from any thread. STRATA_HANDLE_SIGNALS=0 leaves SIGUSR2 alone, as it does SIGTERM/SIGINT.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "collectives/flight_format.h"
#include "collectives/flight_recorder.h"
#include "config/config.h"

namespace strata::runtime {

struct FlightSettings {
  int64_t entries = 2000;  // 0: no recorder
  bool dumpOnFinalize = false;
  collectives::flight::Clock clock = collectives::flight::Clock::kTicker;
  std::chrono::milliseconds tickPeriod{50};  // the ticker's (process-wide)
  std::string dir;  // where rank-<r>.json goes
};

// The job config's flight_recorder section, with STRATA_FLIGHT_ENTRIES,
// STRATA_FLIGHT_DUMP_ON_FINALIZE, STRATA_FLIGHT_CLOCK and STRATA_FLIGHT_TICK_MS taking precedence. Throws ConfigError naming a bad variable.
FlightSettings flightSettings(const config::JobConfig& config);

// The process's recorder, or null when entries is 0. Before any group is created.
std::shared_ptr<collectives::flight::Recorder> createFlightRecorder(const FlightSettings& settings);

// Once the rank is known: failure dumps, the SIGUSR2 thread and handler. `identity` fills
// every dump's header (rank, world size, host, pid). A null recorder: nothing to do.
void startFlightDumps(std::shared_ptr<collectives::flight::Recorder> recorder, const FlightSettings& settings,
                      const collectives::flight::DumpHeader& identity);

// At finalize: the finalize dump when asked, then the SIGUSR2 handler is restored and the
// thread joined. Idempotent; never throws.
void stopFlightDumps();

// Writes this rank's dump now. Returns its path, or "" when there is no recorder or the
// write failed (logged). Never throws.
std::string dumpFlightRecorder(const std::string& trigger, const std::string& message);

}  // namespace strata::runtime
