#include "common.h"

#include <mpi.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace strata::bench {
namespace {

// Warm-up in automatic mode lasts about this long (after one cold call).
constexpr double kWarmupBudgetSec = 5e-3;
// A cheaper call than this gets one untimed call before each trial, so that switching
// implementations between interleaved trials does not charge cold caches to the trial.
constexpr double kRewarmBelowSec = 1e-3;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double maxOverRanks(double v) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

double sumOverRanks(double v) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return out;
}

int64_t sumOverRanks(int64_t v) {
  long long in = v, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return out;
}

// Upper bound on calls per trial by size, as in the notes' mpi_ar.c.
int maxCallsPerTrial(size_t bytes) {
  if (bytes <= (64u << 10)) return 2000;
  if (bytes <= (1u << 20)) return 200;
  if (bytes <= (16u << 20)) return 10;
  if (bytes <= (64u << 20)) return 3;
  return 1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// CPU seconds the whole machine spent busy (user..steal), from /proc/stat.
double machineBusySec() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  unsigned long long v[8] = {0};
  f >> cpu >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6] >> v[7];
  const unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];  // not idle, iowait
  return static_cast<double>(busy) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double ownCpuSec() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

struct Cell {
  double medianSec = 0, minSec = 0, maxSec = 0;
  int callsPerTrial = 0;
  int64_t wrong = -1;  // -1: not checked
  std::string note;
};

// Warm-up and calibration: returns the calls per trial and the estimated seconds per call.
std::pair<int, double> calibrate(const Options& opts, Impl& im, size_t count, size_t bytes) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = now();
  im.run(count);  // the cold call
  const double first = maxOverRanks(now() - t0);
  int warm = opts.warmup;
  if (warm < 0) warm = static_cast<int>(std::clamp(kWarmupBudgetSec / std::max(first, 1e-9), 1.0, 500.0));
  double perCall = first;
  if (warm > 0) {
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now();
    for (int i = 0; i < warm; ++i) im.run(count);
    perCall = maxOverRanks((now() - t0) / warm);
  }
  int calls = opts.iters;
  if (calls <= 0) {
    const double want = opts.trialBudgetMs * 1e-3 / std::max(perCall, 1e-9);
    calls = static_cast<int>(std::clamp(want, 1.0, static_cast<double>(maxCallsPerTrial(bytes))));
  }
  return {calls, perCall};  // identical on every rank: both come from max-reductions
}

double timedTrial(Impl& im, size_t count, int calls, bool rewarm) {
  if (rewarm) im.run(count);
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  for (int i = 0; i < calls; ++i) im.run(count);
  return maxOverRanks((now() - t0) / calls);
}

// Cross-core handoff probe: median round trip of a cache-line ping-pong between ranks 0
// and 1 through POSIX shared memory (spinning, yielding after a while). The host places
// this VM's vCPUs in (at least) two ways ("near" ~0.07 us, "far" ~0.37 us; see
// bench/summarize.py); in the far one every synchronising collective is ~3x slower, so
// every table records the probe at its start and end. -1: ranks 0 and 1 are on two hosts.
bool ranks01ShareHost() {
  int same = processorName() == processorNameOfRank0();
  MPI_Bcast(&same, 1, MPI_INT, 1, MPI_COMM_WORLD);
  return same != 0;
}

double pingPongProbeUs() {
  constexpr int kRounds = 20000;
  const int rank = mpiRank();
  if (mpiSize() < 2) return 0;
  if (!ranks01ShareHost()) return -1;
  char name[64] = {0};
  if (rank == 0) std::snprintf(name, sizeof(name), "/strata_bench_probe.%d", static_cast<int>(getpid()));
  MPI_Bcast(name, sizeof(name), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::atomic<uint64_t>* flag = nullptr;
  if (rank < 2) {
    const int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0) throw std::runtime_error("probe: shm_open/ftruncate failed");
    void* m = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) throw std::runtime_error("probe: mmap failed");
    flag = static_cast<std::atomic<uint64_t>*>(m);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) shm_unlink(name);
  double rtt = 0;
  if (rank < 2) flag->store(0);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank < 2) {
    std::vector<double> samples;
    auto waitFor = [&](uint64_t v) {
      for (int spins = 0; flag->load(std::memory_order_acquire) != v; ++spins)
        if (spins > 4096) sched_yield();
    };
    for (int block = 0; block < 20; ++block) {
      const double t0 = now();
      for (int i = 0; i < kRounds / 20; ++i) {
        const uint64_t base = (static_cast<uint64_t>(block) * (kRounds / 20) + i) * 2;
        if (rank == 0) {
          flag->store(base + 1, std::memory_order_release);
          waitFor(base + 2);
        } else {
          waitFor(base + 1);
          flag->store(base + 2, std::memory_order_release);
        }
      }
      samples.push_back((now() - t0) / (kRounds / 20) * 1e6);
    }
    rtt = median(samples);
    munmap(flag, 4096);
  }
  return maxOverRanks(rtt);
}

double rate(const Impl& im, const BenchSpec& spec, size_t bytes, double sec) {
  const double algbw = static_cast<double>(bytes) / sec / 1e9;
  return im.reference ? algbw : algbw * spec.busBwFactor;
}

class Report {
 public:
  Report(const Options& opts, const BenchSpec& spec, const std::vector<Impl>& impls)
      : opts_(opts), spec_(spec), impls_(impls), root_(mpiRank() == 0) {}

  void header(int ranks, double probeUs) const {
    if (!root_) return;
    std::printf("# strata %s_bench ranks=%d %s dtype=float32 iters=%s warmup=%s time=max-over-ranks "
                "stat=median-of-%d-trials mpi_thread=%s malloc=%s\n",
                spec_.op.c_str(), ranks, spec_.headerExtra.c_str(),
                opts_.iters > 0 ? std::to_string(opts_.iters).c_str() : "auto",
                opts_.warmup >= 0 ? std::to_string(opts_.warmup).c_str() : "auto", opts_.repeats,
                opts_.mpiThread.c_str(), opts_.malloc.c_str());
    for (const std::string& line : spec_.headerNotes) std::printf("# %s\n", line.c_str());
    std::printf("# probe shm ping-pong round trip rank0<->1 us (start): %.2f\n", probeUs);
    std::string l1 = "#                                       ", l2 = "#       size        count    type  redop",
                l3 = "#        (B)   (elements)               ";
    for (const Impl& im : impls_) {
      if (im.reference) continue;
      std::string title = " " + im.name + " ";
      const size_t w = 26, pad = (w - 2 - title.size()) / 2;
      l1 += "  " + std::string(pad, '-') + title + std::string(w - 2 - pad - title.size(), '-');
      l2 += "       time   busbw #wrong";
      l3 += "       (us)  (GB/s)       ";
    }
    char buf[64];
    std::snprintf(buf, sizeof(buf), "  %-13s", spec_.noteName.c_str());
    l2 += buf;
    l3 += "               ";
    for (const Impl& im : impls_) {
      if (!im.reference) continue;
      std::snprintf(buf, sizeof(buf), " %8s", im.name.c_str());
      l2 += buf;
      l3 += "   (GB/s)";
    }
    std::printf("%s\n%s\n%s\n", l1.c_str(), l2.c_str(), l3.c_str());
    std::fflush(stdout);
  }

  void row(size_t bytes, const std::vector<Cell>& cells) {
    rows_.emplace_back(bytes, cells);
    if (!root_) return;
    std::printf("%12zu %12zu %7s %6s", bytes, bytes / spec_.elemBytes, spec_.type.c_str(), spec_.redop.c_str());
    std::string note;
    for (size_t i = 0; i < impls_.size(); ++i) {
      if (impls_[i].reference) continue;
      const Cell& c = cells[i];
      std::printf("  %9.2f %7.2f %6s", c.medianSec * 1e6, rate(impls_[i], spec_, bytes, c.medianSec),
                  c.wrong < 0 ? "N/A" : std::to_string(c.wrong).c_str());
      if (note.empty()) note = c.note;
    }
    std::printf("  %-13s", note.empty() ? "-" : note.c_str());
    for (size_t i = 0; i < impls_.size(); ++i)
      if (impls_[i].reference) std::printf(" %8.2f", rate(impls_[i], spec_, bytes, cells[i].medianSec));
    std::printf("\n");
    std::fflush(stdout);
  }

  void footer(int64_t wrongTotal, double foreignCores, double probeUs) const {
    if (!root_) return;
    std::printf("# probe shm ping-pong round trip rank0<->1 us (end): %.2f\n", probeUs);
    std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrongTotal),
                wrongTotal == 0 ? "OK" : "FAILED");
    double sum = 0;
    for (const auto& [bytes, cells] : rows_) sum += rate(impls_[0], spec_, bytes, cells[0].medianSec);
    std::printf("# Avg bus bandwidth    : %.3f (%s)\n", rows_.empty() ? 0.0 : sum / rows_.size(),
                impls_[0].name.c_str());
    std::printf("# foreign cpu (cores used by other processes during the run): %.2f\n", foreignCores);
    ratios();
    std::fflush(stdout);
  }

  void writeJson() const {
    if (!root_ || opts_.jsonPath.empty()) return;
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [bytes, cells] : rows_) {
      for (size_t i = 0; i < impls_.size(); ++i) {
        const Cell& c = cells[i];
        out.push_back({{"op", spec_.op}, {"impl", impls_[i].name}, {"bytes", bytes},
                       {"count", bytes / spec_.elemBytes}, {"time_us", c.medianSec * 1e6},
                       {"min_us", c.minSec * 1e6}, {"max_us", c.maxSec * 1e6},
                       {"busbw_gbs", rate(impls_[i], spec_, bytes, c.medianSec)},
                       {"calls_per_trial", c.callsPerTrial}, {"wrong", c.wrong}, {"note", c.note}});
      }
    }
    std::ofstream(opts_.jsonPath) << out.dump(1) << "\n";
  }

 private:
  const Cell* find(size_t bytes, size_t impl) const {
    for (const auto& [b, cells] : rows_)
      if (b == bytes) return &cells[impl];
    return nullptr;
  }

  void ratios() const {
    for (size_t s : spec_.ratioSizes) {
      const Cell* base = find(s, 0);
      if (!base) continue;
      const double mine = rate(impls_[0], spec_, s, base->medianSec);
      for (size_t i = 1; i < impls_.size(); ++i) {
        const double other = rate(impls_[i], spec_, s, find(s, i)->medianSec);
        std::printf("# ratio %s/%s %s: %.2f\n", impls_[0].name.c_str(), impls_[i].name.c_str(),
                    sizeLabel(s).c_str(), mine / other);
      }
    }
    if (spec_.latencySize == 0) return;
    for (size_t i = 0; i < impls_.size(); ++i) {
      const Cell* c = find(spec_.latencySize, i);
      if (c && !impls_[i].reference)
        std::printf("# latency %s %s us: %.2f\n", impls_[i].name.c_str(), sizeLabel(spec_.latencySize).c_str(),
                    c->medianSec * 1e6);
    }
  }

  const Options& opts_;
  const BenchSpec& spec_;
  const std::vector<Impl>& impls_;
  bool root_;
  std::vector<std::pair<size_t, std::vector<Cell>>> rows_;
};

std::vector<Cell> measureSize(const Options& opts, std::vector<Impl>& impls, size_t bytes, size_t count,
                              uint32_t seed) {
  std::vector<Cell> cells(impls.size());
  std::vector<double> perCall(impls.size());
  for (size_t i = 0; i < impls.size(); ++i) {
    std::tie(cells[i].callsPerTrial, perCall[i]) = calibrate(opts, impls[i], count, bytes);
  }
  std::vector<std::vector<double>> trials(impls.size());
  for (int r = 0; r < opts.repeats; ++r) {
    for (size_t k = 0; k < impls.size(); ++k) {
      const size_t i = (k + static_cast<size_t>(r)) % impls.size();  // rotate the order
      trials[i].push_back(timedTrial(impls[i], count, cells[i].callsPerTrial, perCall[i] < kRewarmBelowSec));
    }
  }
  for (size_t i = 0; i < impls.size(); ++i) {
    // The note describes the timed calls: take it before the verification call.
    if (impls[i].note) cells[i].note = impls[i].note();
    cells[i].medianSec = median(trials[i]);
    cells[i].minSec = *std::min_element(trials[i].begin(), trials[i].end());
    cells[i].maxSec = *std::max_element(trials[i].begin(), trials[i].end());
    if (opts.check && impls[i].check) cells[i].wrong = sumOverRanks(impls[i].check(count, seed));
  }
  return cells;
}

}  // namespace

int mpiRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

std::string processorName() {
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  return std::string(name, static_cast<size_t>(len));
}

std::string processorNameOfRank0() {
  char root[MPI_MAX_PROCESSOR_NAME] = {0};
  const std::string mine = processorName();
  std::memcpy(root, mine.data(), std::min(mine.size(), sizeof(root) - 1));
  MPI_Bcast(root, sizeof(root), MPI_CHAR, 0, MPI_COMM_WORLD);
  return root;
}

int mpiSize() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

void* allocPrefaulted(size_t bytes) {
  const size_t page = 4096;
  void* p = std::aligned_alloc(page, (bytes + page - 1) / page * page);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return p;
}

size_t parseBytes(const std::string& text) {
  size_t pos = 0;
  const double value = std::stod(text, &pos);
  std::string unit = text.substr(pos);
  for (auto& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  double mult = 1;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit[0] == 'K') mult = 1024.0;
  else if (unit[0] == 'M') mult = 1024.0 * 1024;
  else if (unit[0] == 'G') mult = 1024.0 * 1024 * 1024;
  else throw std::invalid_argument("bad size \"" + text + "\"");
  const double bytes = value * mult;
  if (!(bytes >= 1 && bytes <= 1e15)) throw std::invalid_argument("size \"" + text + "\" out of range");
  return static_cast<size_t>(bytes);
}

std::string sizeLabel(size_t bytes) {
  if (bytes >= (1u << 30) && bytes % (1u << 30) == 0) return std::to_string(bytes >> 30) + "GiB";
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

std::vector<size_t> byteCounts(const Options& opts, size_t elemBytes) {
  std::vector<size_t> out;
  if (opts.minBytes == 0) return out;
  for (double s = static_cast<double>(opts.minBytes); s <= static_cast<double>(opts.maxBytes) * 1.0000001;
       s *= opts.factor) {
    const size_t bytes = std::max(elemBytes, static_cast<size_t>(s) / elemBytes * elemBytes);
    if (out.empty() || bytes != out.back()) out.push_back(bytes);
    if (opts.factor <= 1) break;
  }
  return out;
}

std::string usage() {
  return "usage: allreduce_bench [-b minbytes] [-e maxbytes] [-f factor] [-n iters] [-w warmup]\n"
         "                       [-c 0|1] [--impl strata,mpi,gloo,memcpy,inplace] [--repeats R]\n"
         "                       [--budget-ms MS] [-J out.json] [--mpi-thread single]\n"
         "                       [--buffer private|shared] [--malloc keep|default]\n"
         "  sizes accept K/M/G suffixes; -n 0 / -w -1 (default) choose per size.\n";
}

Options parseOptions(int argc, char** argv, const std::vector<std::string>& defaultImpls) {
  Options o;
  o.impls = defaultImpls;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], v;
    const size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      v = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (a == "-h" || a == "--help") {
      throw std::invalid_argument(usage());
    } else {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value\n" + usage());
      v = argv[++i];
    }
    if (a == "-b" || a == "--minbytes") o.minBytes = parseBytes(v);
    else if (a == "-e" || a == "--maxbytes") o.maxBytes = parseBytes(v);
    else if (a == "-f" || a == "--stepfactor") o.factor = std::stod(v);
    else if (a == "-n" || a == "--iters") o.iters = std::stoi(v);
    else if (a == "-w" || a == "--warmup_iters") o.warmup = std::stoi(v);
    else if (a == "-c" || a == "--check") o.check = std::stoi(v) != 0;
    else if (a == "--impl") o.impls = splitList(v);
    else if (a == "--repeats") o.repeats = std::max(1, std::stoi(v));
    else if (a == "--budget-ms") o.trialBudgetMs = std::stod(v);
    else if (a == "-J" || a == "--json") o.jsonPath = v;
    else if (a == "--mpi-thread") o.mpiThread = v;
    else if (a == "--buffer") o.buffer = v;
    else if (a == "--malloc") o.malloc = v;
    else if (a == "--config") continue;  // strata::init reads it
    else throw std::invalid_argument("unknown flag " + a + "\n" + usage());
  }
  if (o.minBytes > o.maxBytes || !(o.factor >= 1))
    throw std::invalid_argument("need -b <= -e and -f >= 1\n" + usage());
  if (o.mpiThread != "single" && o.mpiThread != "funneled" && o.mpiThread != "serialized" &&
      o.mpiThread != "multiple")
    throw std::invalid_argument("--mpi-thread must be single, funneled, serialized or multiple");
  if (o.buffer != "private" && o.buffer != "shared")
    throw std::invalid_argument("--buffer must be private or shared");
  if (o.malloc != "keep" && o.malloc != "default")
    throw std::invalid_argument("--malloc must be keep or default");
  if (o.impls.empty()) throw std::invalid_argument("--impl needs at least one implementation");
  return o;
}

int64_t runBenchmark(const Options& opts, const BenchSpec& spec, std::vector<Impl>& impls) {
  Report report(opts, spec, impls);
  report.header(mpiSize(), pingPongProbeUs());
  MPI_Barrier(MPI_COMM_WORLD);
  const double wall0 = now(), busy0 = machineBusySec(), own0 = ownCpuSec();
  int64_t wrongTotal = 0;
  uint32_t seed = 1;
  for (size_t bytes : byteCounts(opts, spec.elemBytes)) {
    if (spec.initData) spec.initData(bytes / spec.elemBytes);
    std::vector<Cell> cells = measureSize(opts, impls, bytes, bytes / spec.elemBytes, seed++);
    for (const Cell& c : cells) wrongTotal += std::max<int64_t>(0, c.wrong);
    report.row(bytes, cells);
  }
  const double ours = sumOverRanks(ownCpuSec() - own0);
  const double wall = now() - wall0;
  const double foreign = std::max(0.0, (machineBusySec() - busy0 - ours) / wall);
  report.footer(wrongTotal, foreign, pingPongProbeUs());
  report.writeJson();
  return wrongTotal;
}

}  // namespace strata::bench
