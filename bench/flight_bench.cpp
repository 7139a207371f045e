// flight_bench: what the flight recorder costs a small allreduce (issue 15: < 1% of a 4 KiB
// AllReduce). Side by side in one mpirun job, on the same world group and algorithm:
//   recorder-off  strata::world().allreduce with recording switched off
//   recorder-on   the same with the flight recorder on (the default)
// trials interleaved by the common harness (bench/common.h), so both see the same noise;
// the ratio of their median times is the overhead. Then, on rank 0 alone, the recorder's
// own cost: record + finish of one operation in a tight loop (no communication; in a
// communicator's own lane, as collectives record, and in the shared lane), which
// does not drown in scheduling noise the way a 1% difference of two timings does.
// Prints "# flight recorder overhead 4KiB: <time on / time off>", the record+finish ns of
// each clock (ticker, coarse, precise), and the ticker thread's own CPU time over the whole
// run (the price of the ticker clock, paid once per process). Usage: bench/run_flight.sh.
#include <mpi.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "collectives/communicator.h"
#include "collectives/flight_ticker.h"
#include "common.h"
#include "strata/runtime.h"

namespace sb = strata::bench;
namespace flight = strata::collectives::flight;

namespace {

float* gBuf = nullptr;

sb::Impl strataImpl(const char* name, bool recorder) {
  auto run = [recorder](size_t count) {
    strata::world().communicator().TEST_enableFlightRecorder(recorder);
    strata::world().allreduce(gBuf, gBuf, count, strata::DType::kFloat32, strata::ReduceOp::kSum);
  };
  auto check = [run](size_t count, uint32_t seed) { return sb::checkAllreduce(gBuf, count, seed, [&] { run(count); }); };
  return {name, false, run, check, [] { return strata::world().lastAllreduceAlgorithm(); }};
}

// This thread's CPU time: a loop timed by it does not count the time other jobs held the
// core (a shared machine preempts a 60 ms loop every time).
double threadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// Nanoseconds (thread CPU time) per record() + finish() on a recorder of the default size, best of 5 runs:
// in a private lane (what a communicator's collectives use) or the shared one (point-to-point
// and queued collectives: an atomic add to claim the slot).
double recordCostNs(flight::Clock clock, bool privateLane = true) {
  flight::Recorder rec(2000, clock);
  const uint32_t lane = privateLane ? rec.acquireLane() : 0;
  flight::OpInfo info;
  info.op = flight::Op::kAllReduce;
  info.dtype = strata::DType::kFloat32;
  info.count = 1024;
  info.numBytes = 4096;
  constexpr int kCalls = 2000000;
  double best = 1e30;
  for (int run = 0; run < 5; ++run) {
    const double t0 = threadCpuNs();
    for (int i = 0; i < kCalls; ++i) {
      info.seq = static_cast<uint64_t>(i);
      rec.finish(rec.record(info, flight::State::kStarted, lane), true);
    }
    const double ns = threadCpuNs() - t0;
    best = std::min(best, ns / kCalls);
  }
  return best;
}

double medianUs(const std::string& jsonPath, const std::string& impl, size_t bytes) {
  std::ifstream in(jsonPath);
  for (const auto& row : nlohmann::json::parse(in))
    if (row["impl"] == impl && row["bytes"] == bytes) return row["time_us"].get<double>();
  throw std::runtime_error("no " + impl + " row in " + jsonPath);
}

double wallNs() {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count());
}

const char* runClockName() {
  const char* env = std::getenv("STRATA_FLIGHT_CLOCK");
  return env && *env ? env : "ticker";
}

int runMain(sb::Options opts) {
  constexpr size_t k4KiB = 4096;
  const double wall0 = wallNs();
  const flight::TickerStats ticker0 = flight::tickerStats();
  const bool ownJson = opts.jsonPath.empty();  // the ratio is read back from the harness's JSON
  if (ownJson) opts.jsonPath = "/tmp/flight_bench." + std::to_string(getpid()) + ".json";
  gBuf = static_cast<float*>(sb::allocPrefaulted(opts.maxBytes));
  const int n = sb::mpiSize();
  sb::BenchSpec spec;
  spec.op = "allreduce";
  spec.busBwFactor = 2.0 * (n - 1) / n;
  spec.headerExtra = "flight_recorder_entries=" + std::to_string(strata::world().communicator().options().flight
                                                                     ? strata::world().communicator().options().flight->capacity()
                                                                     : 0);
  spec.noteName = "strata-algo";
  spec.ratioSizes = {k4KiB};
  spec.latencySize = k4KiB;
  spec.headerNotes.push_back("strata: " + strata::world().describe());
  if (!strata::world().communicator().options().flight)
    throw std::runtime_error("the flight recorder is off (STRATA_FLIGHT_ENTRIES=0?): nothing to compare");
  std::vector<sb::Impl> impls = {strataImpl("recorder-off", false), strataImpl("recorder-on", true)};
  const int64_t wrong = sb::runBenchmark(opts, spec, impls);
  strata::world().communicator().TEST_enableFlightRecorder(true);
  // Every rank runs the loops at once (rank 0 reports): a rank left waiting in a barrier
  // would poll on the other core and slow rank 0's loop, which training never does.
  // The ticker's CPU over the AllReduce trials only: the loops below hold it too, but
  // time it less fairly (both cores busy).
  const flight::TickerStats ticker1 = flight::tickerStats();
  const double wall1 = wallNs();
  const double ticker = recordCostNs(flight::Clock::kTicker);
  const double coarse = recordCostNs(flight::Clock::kCoarse);
  const double precise = recordCostNs(flight::Clock::kPrecise);
  const double shared = recordCostNs(flight::Clock::kTicker, false);
  if (sb::mpiRank() == 0) {
    const std::string clock = runClockName();
    const double cost = clock == "precise" ? precise : clock == "coarse" ? coarse : ticker;
    std::printf("# flight recorder clock of the runs above: %s\n", clock.c_str());
    std::printf("# flight recorder record+finish ns (ticker clock): %.1f\n", ticker);
    std::printf("# flight recorder record+finish ns (coarse clock): %.1f\n", coarse);
    std::printf("# flight recorder record+finish ns (precise clock): %.1f\n", precise);
    std::printf("# flight recorder record+finish ns (ticker clock, shared lane: p2p, queued): %.1f\n", shared);
    if (ticker1.running && ticker0.running && wall1 > wall0) {
      const double seconds = (wall1 - wall0) * 1e-9;
      const double cpuUsPerS = static_cast<double>(ticker1.cpuNs - ticker0.cpuNs) * 1e-3 / seconds;
      const double ticks = static_cast<double>(ticker1.ticks - ticker0.ticks);
      std::printf("# flight recorder ticker thread (period %.0f ms): %.1f us CPU per s (%.4f%% of a core), "
                  "%.0f ticks/s, %.1f us per tick, max gap %.2f ms, over %.1f s\n",
                  static_cast<double>(flight::tickerPeriod().count()) * 1e-3, cpuUsPerS, cpuUsPerS * 1e-4,
                  ticks / seconds, ticks > 0 ? cpuUsPerS * seconds / ticks : 0.0,
                  static_cast<double>(ticker1.maxGapNs) * 1e-6, seconds);
    }
    if (opts.minBytes <= k4KiB && k4KiB <= opts.maxBytes) {
      const double off = medianUs(opts.jsonPath, "recorder-off", k4KiB);
      const double on = medianUs(opts.jsonPath, "recorder-on", k4KiB);
      std::printf("# flight recorder cost / 4KiB allreduce (record+finish over recorder-off time): %.4f\n",
                  cost * 1e-3 / off);
      std::printf("# flight recorder overhead 4KiB: %.4f\n", on / off);
    }
    std::fflush(stdout);
    if (ownJson) std::remove(opts.jsonPath.c_str());
  }
  std::free(gBuf);
  return wrong == 0 ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  sb::Options opts;
  try {
    opts = sb::parseOptions(argc, argv, {"recorder-off", "recorder-on"});
  } catch (const std::logic_error& e) {
    const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
    if (!r || std::string(r) == "0") std::fprintf(stderr, "flight_bench: %s\n", e.what());
    return 1;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
  strata::init(argc, argv);
  int rc = 0;
  try {
    rc = runMain(opts);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flight_bench rank %d: %s\n", sb::mpiRank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  strata::finalize();
  MPI_Finalize();
  return rc;
}
