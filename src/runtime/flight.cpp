#include "runtime/flight.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/atomic_file.h"
#include "core/env.h"
#include "core/logging.h"

namespace strata::runtime {
namespace {

namespace flight = collectives::flight;

// What the dump thread hears on its pipe.
constexpr char kDumpByte = 'd';
constexpr char kStopByte = 'q';

struct FlightState {
  std::shared_ptr<flight::Recorder> recorder;
  FlightSettings settings;
  flight::DumpHeader identity;
  std::mutex dumpMu;  // one dump at a time (they write the same file)
  int pipe[2] = {-1, -1};
  std::thread thread;
  bool handlerInstalled = false;
  struct sigaction previous {};
};

std::mutex stateMu;
std::shared_ptr<FlightState> state;  // guarded by stateMu
// The pipe's write end for the signal handler (-1: none). Lock-free, so signal-safe.
std::atomic<int> wakeFd{-1};
static_assert(std::atomic<int>::is_always_lock_free, "the SIGUSR2 handler needs a lock-free int");

void onSigusr1(int) {
  const int savedErrno = errno;
  const int fd = wakeFd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const char byte = kDumpByte;
    const ssize_t written = write(fd, &byte, 1);  // full pipe: a dump is pending anyway
    (void)written;
  }
  errno = savedErrno;
}

std::string writeDump(FlightState& s, const std::string& trigger, const std::string& message) {
  std::lock_guard<std::mutex> lock(s.dumpMu);
  flight::DumpHeader header = s.identity;
  header.trigger = trigger;
  header.message = message;
  const std::string text = flight::dumpText(flight::dumpToJson(s.recorder->snapshot(), header));
  const std::string path = s.settings.dir + "/" + flight::dumpFileName(s.identity.rank);
  // Atomic only: the page cache outlives this process (a launcher may kill it next); an
  // fsync would hold the error back from the peers' for tens of milliseconds.
  writeFileAtomically(path, text, Durability::kAtomicOnly);
  STRATA_LOG(kWarn, kColl, "flight recorder: wrote ", path, " (", trigger, ")");
  return path;
}

std::string dumpQuietly(FlightState& s, const std::string& trigger, const std::string& message) noexcept {
  try {
    return writeDump(s, trigger, message);
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kColl, "flight recorder: the ", trigger, " dump to ", s.settings.dir, " failed: ", e.what());
  } catch (...) {
    STRATA_LOG(kError, kColl, "flight recorder: the ", trigger, " dump to ", s.settings.dir, " failed");
  }
  return "";
}

void dumpThread(std::shared_ptr<FlightState> s) {
  pthread_setname_np(pthread_self(), "strata-flight");
  char bytes[64];
  for (;;) {
    const ssize_t n = read(s->pipe[0], bytes, sizeof(bytes));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    bool dump = false, stop = false;
    for (ssize_t i = 0; i < n; ++i) {
      dump = dump || bytes[i] == kDumpByte;
      stop = stop || bytes[i] == kStopByte;
    }
    if (dump) dumpQuietly(*s, "signal", "SIGUSR2");
    if (stop) return;
  }
}

void startSignalDumps(FlightState& s) {
  if (env::getInt("STRATA_HANDLE_SIGNALS", 1, 0, 1) == 0) return;
  if (pipe2(s.pipe, O_CLOEXEC) != 0) {
    STRATA_LOG(kWarn, kColl, "flight recorder: no SIGUSR2 dumps (pipe: ", std::strerror(errno), ")");
    return;
  }
  fcntl(s.pipe[1], F_SETFL, fcntl(s.pipe[1], F_GETFL) | O_NONBLOCK);
  wakeFd.store(s.pipe[1]);
  struct sigaction action {};
  action.sa_handler = onSigusr1;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  s.handlerInstalled = sigaction(SIGUSR2, &action, &s.previous) == 0;
}

void stopSignalDumps(FlightState& s) {
  if (s.handlerInstalled) sigaction(SIGUSR2, &s.previous, nullptr);
  s.handlerInstalled = false;
  wakeFd.store(-1);
  if (s.thread.joinable()) {
    const char byte = kStopByte;
    while (write(s.pipe[1], &byte, 1) < 0 && errno == EINTR) {
    }
    s.thread.join();
  }
  for (int& fd : s.pipe) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

}  // namespace

FlightSettings flightSettings(const config::JobConfig& config) {
  FlightSettings s;
  s.entries = env::getInt("STRATA_FLIGHT_ENTRIES", config.flightRecorder.entries, 0, config::kMaxFlightRecorderEntries);
  s.dumpOnFinalize = env::getInt("STRATA_FLIGHT_DUMP_ON_FINALIZE", config.flightRecorder.dumpOnFinalize ? 1 : 0, 0, 1) == 1;
  const std::string clock =
      env::getString("STRATA_FLIGHT_CLOCK", config.flightRecorder.clock, {"ticker", "coarse", "precise"});
  s.clock = clock == "precise" ? flight::Clock::kPrecise : clock == "coarse" ? flight::Clock::kCoarse : flight::Clock::kTicker;
  s.tickPeriod = std::chrono::milliseconds(env::getInt("STRATA_FLIGHT_TICK_MS", config.flightRecorder.tickMs,
                                                      config::kMinFlightTickMs, config::kMaxFlightTickMs));
  s.dir = config.outputDir + "/flight";
  return s;
}

std::shared_ptr<flight::Recorder> createFlightRecorder(const FlightSettings& settings) {
  if (settings.entries == 0) return nullptr;
  if (settings.clock == flight::Clock::kTicker) flight::setTickerPeriod(settings.tickPeriod);
  return std::make_shared<flight::Recorder>(static_cast<size_t>(settings.entries), settings.clock);
}

void startFlightDumps(std::shared_ptr<flight::Recorder> recorder, const FlightSettings& settings,
                      const flight::DumpHeader& identity) {
  if (!recorder) return;
  stopFlightDumps();
  auto s = std::make_shared<FlightState>();
  s->recorder = recorder;
  s->settings = settings;
  s->identity = identity;
  // The lambda holds the state: a failure reported while finalize runs still has it.
  recorder->setFailureHandler([s](const flight::FailureEvent& e) {
    dumpQuietly(*s, e.trigger, (e.group.empty() ? "" : "group \"" + e.group + "\" ") + e.op + ": " + e.message);
  });
  startSignalDumps(*s);
  if (s->pipe[0] >= 0) s->thread = std::thread(dumpThread, s);
  STRATA_LOG(kInfo, kInit, "flight recorder: ", settings.entries, " records per rank, dumps to ", settings.dir,
             s->handlerInstalled ? " (also on SIGUSR2)" : "", settings.dumpOnFinalize ? " and at finalize" : "");
  std::lock_guard<std::mutex> lock(stateMu);
  state = std::move(s);
}

void stopFlightDumps() {
  std::shared_ptr<FlightState> s;
  {
    std::lock_guard<std::mutex> lock(stateMu);
    s = std::move(state);
  }
  if (!s) return;
  if (s->settings.dumpOnFinalize) dumpQuietly(*s, "finalize", "strata::finalize");
  stopSignalDumps(*s);
  s->recorder->setFailureHandler(nullptr);
}

std::string dumpFlightRecorder(const std::string& trigger, const std::string& message) {
  std::shared_ptr<FlightState> s;
  {
    std::lock_guard<std::mutex> lock(stateMu);
    s = state;
  }
  return s ? dumpQuietly(*s, trigger, message) : std::string();
}

}  // namespace strata::runtime
