// The one benchmark harness (STYLE 2.7): options, warm-up, timed trials, verification and
// the nccl-tests style report, for several implementations measured side by side.
//
// Every rank runs the same sequence. Per size: each implementation is warmed up and
// calibrated (iterations per trial from a time budget unless -n is given), then R trials
// are interleaved across implementations (rotating the order every trial, so all of them
// see the same host noise); a trial is MPI_Barrier + n back-to-back calls, its time the
// maximum over ranks; the reported time is the median trial. After the trials each
// implementation runs one verification call on seeded small-integer data.
// MPI must be initialised (strata::init does it under mpirun) before any of this runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace strata::bench {

struct Options {
  size_t minBytes = 4 << 10;      // -b
  size_t maxBytes = 256 << 20;    // -e
  double factor = 4;              // -f
  int iters = 0;                  // -n: calls per trial; 0 = from the time budget
  int warmup = -1;                // -w: warm-up calls per size; -1 = automatic
  bool check = true;              // -c 0|1
  int repeats = 5;                // --repeats: timed trials per size and implementation
  double trialBudgetMs = 20;      // --budget-ms: target duration of one trial (auto -n)
  std::vector<std::string> impls; // --impl a,b,c
  std::string jsonPath;           // -J
  // --mpi-thread: the thread level the benchmark initialises MPI with before strata::init
  // (single | funneled | serialized | multiple). Open MPI 4.1 adds ~0.3 us to a 4 KiB
  // allreduce (0.63 -> 0.92 us) at any level above single, and strata::init would ask for
  // multiple; "single" (what MPI_Init gives, the notes' baseline) is the fair default: only
  // the main thread calls MPI here (gloo's and Strata's threads never do).
  std::string mpiThread = "single";
  // --buffer (allreduce_bench): where Strata's data lives: "private" (ordinary memory, staged
  // through the shm slots) or "shared" (a Group::allocateShared buffer: the zero-copy path).
  // The other implementations always use ordinary memory.
  std::string buffer = "private";
  // --malloc (allreduce_bench): "keep" (default) makes glibc keep freed memory in the heap
  // (no mmap, no trim), so a baseline that allocates a message-sized temporary per call
  // (Open MPI's and Gloo's large allreduces) faults its pages in once, not on every call;
  // "default" leaves glibc as it is. On this VM a first-touch page fault costs ~15 us
  // (0.27 GB/s), which made Open MPI 10-40x slower at 16-256 MiB (bench/RESULTS.md).
  std::string malloc = "keep";
};

// Parses nccl-tests style flags; unknown flags throw std::invalid_argument.
// `defaultImpls` is used when --impl is not given.
Options parseOptions(int argc, char** argv, const std::vector<std::string>& defaultImpls);
std::string usage();
// "4K", "64KiB", "1M", "256MB", "4096" -> bytes.
size_t parseBytes(const std::string& text);
// 65536 -> "64KiB" (exact binary units, else plain bytes).
std::string sizeLabel(size_t bytes);
std::vector<size_t> byteCounts(const Options& opts, size_t elemBytes);

// One implementation of the operation under test. All callbacks act on the benchmark's
// buffers, which the caller owns; they are collective across ranks.
struct Impl {
  std::string name;
  // A reference (memcpy): its rate is S/t and it is printed at the end of the row.
  bool reference = false;
  // One operation on `count` elements.
  std::function<void(size_t count)> run;
  // Fills inputs from `seed`, runs once, returns the wrong elements on this rank.
  std::function<int64_t(size_t count, uint32_t seed)> check;
  // Optional text for the row after the timed trials (e.g. the algorithm used).
  std::function<std::string()> note;
};

struct BenchSpec {
  std::string op;            // "allreduce"
  std::string type = "float";
  std::string redop = "sum";
  size_t elemBytes = 4;
  double busBwFactor = 1;    // busbw = algbw * factor (allreduce: 2(n-1)/n)
  std::string headerExtra;   // appended to the "# strata <op>_bench ..." line
  std::vector<std::string> headerNotes;  // printed as "# ..." lines after it
  // Fills the benchmark's buffers before each size is timed (optional).
  std::function<void(size_t count)> initData;
  std::string noteName;      // column title of Impl::note (e.g. "algo")
  // Implementations whose busbw is compared with the first one in "# ratio" lines.
  std::vector<size_t> ratioSizes;
  size_t latencySize = 0;    // "# latency <impl> <size> us" lines when in range (0: none)
};

// Runs every size for every implementation and prints the table on rank 0.
// Returns the total number of wrong elements over all ranks (0 = OK).
int64_t runBenchmark(const Options& opts, const BenchSpec& spec, std::vector<Impl>& impls);

// Small helpers shared by the benchmarks.
int mpiRank();
int mpiSize();
std::string processorName();        // MPI_Get_processor_name: the hostname
std::string processorNameOfRank0();  // collective: rank 0's, on every rank
void* allocPrefaulted(size_t bytes);  // page aligned, written once; free with std::free
// Deterministic small integer for (rank, index, seed) in [-8, 7]: sums of a few ranks are exact.
inline float seededValue(int rank, size_t i, uint32_t seed) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 13 + seed) & 15) - 8);
}


// Seeds `buf` with seededValue(this rank, i, seed), runs `op` (an in-place sum AllReduce of
// `buf` over all ranks) once, and counts the elements that differ from the exact sum.
template <typename Op>
int64_t checkAllreduce(float* buf, size_t count, uint32_t seed, Op op) {
  const int rank = mpiRank(), n = mpiSize();
  for (size_t i = 0; i < count; ++i) buf[i] = seededValue(rank, i, seed);
  op();
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    float expect = 0;
    for (int r = 0; r < n; ++r) expect += seededValue(r, i, seed);
    wrong += buf[i] != expect;
  }
  return wrong;
}
}  // namespace strata::bench
