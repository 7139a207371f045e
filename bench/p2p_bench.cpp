// p2p_bench: point-to-point latency and bandwidth of the pipeline's stage link (issue 14),
// shared memory against TCP, in one mpirun job of 2 ranks on one host. Both links of the
// world group carry the same ping-pong: rank 0 sends S bytes and waits for S bytes back;
// the one-way time is a round trip over 2. Trials alternate between the links (the order
// rotates every trial) so both see the same load; each size reports the median trial.
// Every size is first checked: the bytes that arrive are the bytes sent, both ways.
//
// Prints a table (size, one-way us and GB/s per link, the shm/tcp bandwidth ratio) and
//   # p2p shm latency us: <one-way us of an 8-byte message over shm>
//   # p2p tcp latency us: <the same over tcp>
//   # p2p shm/tcp bandwidth 4MiB: <ratio of the 4 MiB bandwidths>
// Usage: bench/run_p2p.sh (mpirun -np 2 build/bench/p2p_bench [--min 4K --max 64M --repeats 7]).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "strata/group.h"
#include "strata/runtime.h"
#include "transport/shm/ring_plan.h"

namespace {

using strata::transport::Connection;
using strata::transport::Kind;

constexpr auto kWait = std::chrono::seconds(60);
constexpr size_t kLatencyBytes = 8;
constexpr size_t k4MiB = size_t{4} << 20;

struct Args {
  size_t minBytes = 4 << 10;
  size_t maxBytes = size_t{64} << 20;
  int repeats = 7;
  double trialMs = 30;  // target duration of one trial
  double replyDelayUs = 0;  // each side computes this long before it sends (waits then sleep)
};

size_t parseSize(const std::string& text) {
  size_t end = 0;
  const double v = std::stod(text, &end);
  const std::string unit = text.substr(end);
  const double scale = unit.empty() ? 1 : unit[0] == 'K' ? 1024.0 : unit[0] == 'M' ? 1048576.0 : unit[0] == 'G' ? 1073741824.0 : 1;
  return static_cast<size_t>(v * scale);
}

Args parseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--min") a.minBytes = parseSize(argv[i + 1]);
    else if (flag == "--max") a.maxBytes = parseSize(argv[i + 1]);
    else if (flag == "--repeats") a.repeats = std::stoi(argv[i + 1]);
    else if (flag == "--trial-ms") a.trialMs = std::stod(argv[i + 1]);
    else if (flag == "--reply-delay-us") a.replyDelayUs = std::stod(argv[i + 1]);
  }
  return a;
}

std::string label(size_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

double g_replyDelayUs = 0;

// Busy for the reply delay (a stage computing before it sends): the peer's receive waits
// that long, past the link's spin, and sleeps, as a pipeline stage's receives do.
void computeBeforeSend() {
  if (g_replyDelayUs <= 0) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(g_replyDelayUs);
  while (std::chrono::steady_clock::now() < until) {
  }
}

// `iters` round trips of `bytes` over `c`; returns the seconds they took on rank 0, less
// the reply delays (so the one-way time includes the waiter's wake-up, not the delay).
double pingPong(Connection& c, int rank, uint8_t* send, uint8_t* recv, size_t bytes, int iters) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    if (rank == 0) {
      computeBeforeSend();
      c.postSend(send, bytes, 1)->wait(kWait);
      c.postRecv(recv, bytes, 2)->wait(kWait);
    } else {
      c.postRecv(recv, bytes, 1)->wait(kWait);
      computeBeforeSend();
      c.postSend(send, bytes, 2)->wait(kWait);
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - iters * 2 * g_replyDelayUs * 1e-6;
}

// One round trip of distinct patterns; false if a byte differs on either side.
bool check(Connection& c, int rank, std::vector<uint8_t>& send, std::vector<uint8_t>& recv, size_t bytes) {
  for (size_t k = 0; k < bytes; ++k) send[k] = static_cast<uint8_t>(k * 13 + static_cast<size_t>(rank) * 101 + bytes);
  std::fill(recv.begin(), recv.begin() + static_cast<std::ptrdiff_t>(bytes), 0xEE);
  pingPong(c, rank, send.data(), recv.data(), bytes, 1);
  for (size_t k = 0; k < bytes; ++k)
    if (recv[k] != static_cast<uint8_t>(k * 13 + static_cast<size_t>(1 - rank) * 101 + bytes)) return false;
  return true;
}

int run(const Args& args) {
  strata::Group& world = strata::world();
  const int rank = world.rank();
  if (world.size() != 2) {
    if (rank == 0) std::fprintf(stderr, "p2p_bench: run with exactly 2 ranks\n");
    return 2;
  }
  auto& comm = world.communicator();
  const int peer = 1 - rank;
  std::map<std::string, Connection*> links = {{"shm", comm.TEST_p2pConnection(peer, Kind::kShm)},
                                              {"tcp", comm.TEST_p2pConnection(peer, Kind::kTcp)}};
  for (const auto& [name, c] : links) {
    if (c == nullptr) {
      if (rank == 0) std::fprintf(stderr, "p2p_bench: no %s link (both ranks on one host, STRATA_TRANSPORT=auto?)\n", name.c_str());
      return 2;
    }
  }
  std::vector<size_t> sizes = {kLatencyBytes};
  for (size_t s = args.minBytes; s <= args.maxBytes; s *= 4) sizes.push_back(s);
  if (std::find(sizes.begin(), sizes.end(), k4MiB) == sizes.end()) sizes.push_back(k4MiB);
  std::sort(sizes.begin(), sizes.end());
  std::vector<uint8_t> send(sizes.back()), recv(sizes.back());
  const std::vector<std::string> order = {"shm", "tcp"};
  std::map<std::string, std::map<size_t, double>> oneWayUs;
  if (rank == 0) {
    std::printf("# p2p_bench: ping-pong between 2 ranks on one host, median of %d trials, ring %zu bytes\n",
                args.repeats, strata::transport::shm::p2pRingBytes(2, comm.options().p2pRingBytes));
    std::printf("%10s %12s %10s %12s %10s %9s\n", "size", "shm_us", "shm_GB/s", "tcp_us", "tcp_GB/s", "shm/tcp");
  }
  for (size_t bytes : sizes) {
    std::map<std::string, int> iters;
    for (const std::string& name : order) {
      if (!check(*links[name], rank, send, recv, bytes)) {
        std::fprintf(stderr, "p2p_bench: rank %d: wrong bytes over %s at %zu bytes\n", rank, name.c_str(), bytes);
        return 1;
      }
      // Calibrate on rank 0's warm-up round trips, so a trial lasts about trialMs.
      double seconds = pingPong(*links[name], rank, send.data(), recv.data(), bytes, 3) / 3;
      MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      iters[name] = std::clamp(static_cast<int>(args.trialMs / 1000 / std::max(seconds, 1e-7)), 2, 20000);
    }
    std::map<std::string, std::vector<double>> trials;
    for (int t = 0; t < args.repeats; ++t) {
      for (size_t k = 0; k < order.size(); ++k) {
        const std::string& name = order[(k + static_cast<size_t>(t)) % order.size()];
        MPI_Barrier(MPI_COMM_WORLD);
        const double s = pingPong(*links[name], rank, send.data(), recv.data(), bytes, iters[name]);
        trials[name].push_back(s / iters[name] / 2 * 1e6);
      }
    }
    for (auto& [name, v] : trials) {
      std::sort(v.begin(), v.end());
      oneWayUs[name][bytes] = v[v.size() / 2];
    }
    if (rank == 0) {
      const double shm = oneWayUs["shm"][bytes], tcp = oneWayUs["tcp"][bytes];
      std::printf("%10s %12.2f %10.3f %12.2f %10.3f %9.2f\n", label(bytes).c_str(), shm, bytes / shm / 1e3, tcp,
                  bytes / tcp / 1e3, tcp / shm);
      std::fflush(stdout);
    }
  }
  if (rank == 0) {
    std::printf("# p2p shm latency us: %.2f\n", oneWayUs["shm"][kLatencyBytes]);
    std::printf("# p2p tcp latency us: %.2f\n", oneWayUs["tcp"][kLatencyBytes]);
    std::printf("# p2p shm/tcp bandwidth 4MiB: %.2f\n", oneWayUs["tcp"][k4MiB] / oneWayUs["shm"][k4MiB]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
  strata::init(argc, argv);
  int rc = 0;
  try {
    const Args args = parseArgs(argc, argv);
    g_replyDelayUs = args.replyDelayUs;
    rc = run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "p2p_bench: %s\n", e.what());
    rc = 1;
  }
  strata::finalize();
  MPI_Finalize();
  return rc;
}
