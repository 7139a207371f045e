#include "collectives/cost_model.h"

#include <algorithm>
#include <limits>

namespace strata::collectives {
namespace {

// One table of constants. Provenance: bench/RESULTS.md (2-vCPU EPYC VM, 2 ranks, 512 KiB
// chunks): a cross-core flag handoff ~0.15 us; the chunked algorithm moves ~3.5 S bytes per
// rank, in 61 us at 1 MiB (~60 GB/s, caches) and 21.6 ms at 256 MiB (~40 GB/s, DRAM);
// loopback TCP ~20 us per message and ~4 GB/s per direction; summing a received buffer
// ~12 GB/s.
struct Costs {
  double shmSyncUs = 0.15;
  double shmCacheBytesPerUs = 60e3;   // per rank, while the buffers stay in L2/L3
  double shmDramBytesPerUs = 40e3;    // per rank, streaming from DRAM
  size_t cacheResidentBytes = 4 << 20;
  double tcpLatencyUs = 20.0;
  double tcpBytesPerUs = 4e3;         // loopback, one direction (full duplex)
  double reduceBytesPerUs = 12e3;     // summing a received buffer into ours, DRAM-bound
};
constexpr Costs kCosts{};

double memBytesPerUs(size_t numBytes) {
  return numBytes <= kCosts.cacheResidentBytes ? kCosts.shmCacheBytesPerUs : kCosts.shmDramBytesPerUs;
}

double shmOneShotUs(const TopologySummary& t, size_t s) {
  // copy in S, one sync, read n*S and write S.
  const double n = t.maxLocalSize;
  return kCosts.shmSyncUs * n / 2 + (s + n * s + s) / memBytesPerUs(s);
}

double shmChunkedUs(const TopologySummary& t, size_t s) {
  const double n = t.maxLocalSize;
  const size_t chunk = std::max<size_t>(1, std::min(t.chunkBytes, t.shmSlotBytes));
  const double chunks = static_cast<double>((s + chunk - 1) / chunk);
  // copy in S, reduce S/n (reading n*S/n), write 2*S/n, copy out S(n-1)/n.
  const double bytes = s + s + 2.0 * s / n + s * (n - 1) / n;
  return chunks * 2 * kCosts.shmSyncUs * n / 2 + bytes / memBytesPerUs(s);
}

double shmDirectUs(const TopologySummary& t, size_t s) {
  const double n = t.maxLocalSize;
  // No copy-in: reduce my shard reading n*S/n and push it into all n parts (write S). Two
  // syncs (entry, exit) at any size, but the exit mostly waits for pushes that run anyway:
  // counted as one. Measured (bench/RESULTS.md, far mode) at least as fast as the staged
  // one-shot down to 8 bytes (0.66 vs 0.72 us; 4 KiB 0.91 vs 1.63 us).
  return kCosts.shmSyncUs * n / 2 + 2.0 * s / memBytesPerUs(s);
}

double tcpDirectUs(const TopologySummary& t, size_t s) {
  const double n = t.worldSize;
  // Sends to and receives from every peer at once, then reduces n-1 full buffers.
  return kCosts.tcpLatencyUs + (n - 1) * s / kCosts.tcpBytesPerUs + (n - 1) * s / kCosts.reduceBytesPerUs;
}

double tcpRingUs(const TopologySummary& t, size_t s) {
  const double n = t.worldSize;
  // 2(n-1) latency-bound steps; each rank reduces only (n-1)/n of the buffer. With two
  // ranks the ring overtakes direct exchange near 2 * latency * reduce rate (~0.5 MiB).
  return 2 * (n - 1) * kCosts.tcpLatencyUs + 2 * (n - 1) / n * s / kCosts.tcpBytesPerUs +
         (n - 1) / n * s / kCosts.reduceBytesPerUs;
}

double hierarchicalUs(const TopologySummary& t, size_t s) {
  const double local = t.maxLocalSize;
  const double hosts = t.numHosts;
  const double shard = s / local;
  return 2 * shmChunkedUs(t, s) / 2 + 2 * (hosts - 1) * kCosts.tcpLatencyUs +
         2 * (hosts - 1) / hosts * shard / kCosts.tcpBytesPerUs;
}

double hierarchicalDirectUs(const TopologySummary& t, size_t s) {
  const double hosts = t.numHosts;
  const double shard = s / static_cast<double>(t.maxLocalSize);
  return shmDirectUs(t, s) + 2 * (hosts - 1) * kCosts.tcpLatencyUs +
         2 * (hosts - 1) / hosts * shard / kCosts.tcpBytesPerUs;
}

constexpr AllReduceAlgo kAllAlgos[] = {AllReduceAlgo::kShmOneShot,   AllReduceAlgo::kShmChunked,
                                       AllReduceAlgo::kShmDirect,    AllReduceAlgo::kHierarchical,
                                       AllReduceAlgo::kHierarchicalDirect, AllReduceAlgo::kTcpDirect,
                                       AllReduceAlgo::kTcpRing};

}  // namespace

size_t defaultChunkBytes(size_t slotBytes, int localSize, int cores) {
  const size_t preferred = localSize > cores ? (256 << 10) : (512 << 10);
  return std::min(slotBytes, preferred);
}

size_t defaultDirectBlockBytes() { return 128 << 10; }

const char* algoName(AllReduceAlgo algo) {
  switch (algo) {
    case AllReduceAlgo::kShmOneShot: return "shm_oneshot";
    case AllReduceAlgo::kShmChunked: return "shm_chunked";
    case AllReduceAlgo::kTcpDirect: return "tcp_direct";
    case AllReduceAlgo::kTcpRing: return "tcp_ring";
    case AllReduceAlgo::kHierarchical: return "hierarchical";
    case AllReduceAlgo::kShmDirect: return "shm_direct";
    case AllReduceAlgo::kHierarchicalDirect: return "hierarchical_direct";
  }
  return "?";
}

std::vector<std::string> algoNames() {
  return {"auto",     "shm_oneshot",  "shm_chunked", "shm_direct", "tcp_direct",
          "tcp_ring", "hierarchical", "hierarchical_direct"};
}

std::optional<AllReduceAlgo> parseAlgo(const std::string& name) {
  for (AllReduceAlgo a : kAllAlgos) {
    if (name == algoName(a)) return a;
  }
  return std::nullopt;
}

bool supports(AllReduceAlgo algo, const TopologySummary& t, size_t numBytes, Placement placement) {
  const bool oneHostShm = t.numHosts == 1 && t.shmEnabled;
  const bool manyHostsShm = t.numHosts > 1 && t.shmEnabled && t.tcpEnabled && t.uniformLocalSize &&
                            t.maxLocalSize > 1;
  const bool shared = placement == Placement::kSharedInPlace;
  switch (algo) {
    case AllReduceAlgo::kShmOneShot: return oneHostShm && numBytes <= t.shmSlotBytes;
    case AllReduceAlgo::kShmChunked: return oneHostShm;
    case AllReduceAlgo::kTcpDirect: return t.tcpEnabled;
    case AllReduceAlgo::kTcpRing: return t.tcpEnabled;
    case AllReduceAlgo::kHierarchical: return manyHostsShm;
    case AllReduceAlgo::kShmDirect: return oneHostShm && shared;
    case AllReduceAlgo::kHierarchicalDirect: return manyHostsShm && shared;
  }
  return false;
}

double estimateUs(AllReduceAlgo algo, const TopologySummary& t, size_t numBytes) {
  switch (algo) {
    case AllReduceAlgo::kShmOneShot: return shmOneShotUs(t, numBytes);
    case AllReduceAlgo::kShmChunked: return shmChunkedUs(t, numBytes);
    case AllReduceAlgo::kTcpDirect: return tcpDirectUs(t, numBytes);
    case AllReduceAlgo::kTcpRing: return tcpRingUs(t, numBytes);
    case AllReduceAlgo::kHierarchical: return hierarchicalUs(t, numBytes);
    case AllReduceAlgo::kShmDirect: return shmDirectUs(t, numBytes);
    case AllReduceAlgo::kHierarchicalDirect: return hierarchicalDirectUs(t, numBytes);
  }
  return std::numeric_limits<double>::infinity();
}

AlgoChoice chooseAllReduce(const TopologySummary& t, size_t numBytes, const std::string& forced,
                           Placement placement) {
  AlgoChoice choice;
  if (!forced.empty() && forced != "auto") {
    const auto algo = parseAlgo(forced);
    if (!algo) {
      choice.error = "unknown allreduce algorithm \"" + forced + "\"";
      return choice;
    }
    if (!supports(*algo, t, numBytes, placement)) {
      choice.error = std::string("allreduce algorithm ") + algoName(*algo) +
                     " cannot run here (hosts=" + std::to_string(t.numHosts) +
                     ", shm=" + (t.shmEnabled ? "on" : "off") + ", bytes=" +
                     std::to_string(numBytes) +
                     (placement == Placement::kSharedInPlace ? ", in place in a shared buffer" : "") + ")";
      return choice;
    }
    choice.algo = *algo;
    return choice;
  }
  double best = std::numeric_limits<double>::infinity();
  for (AllReduceAlgo a : kAllAlgos) {
    if (!supports(a, t, numBytes, placement)) continue;
    const double us = estimateUs(a, t, numBytes);
    if (us < best) {
      best = us;
      choice.algo = a;
    }
  }
  return choice;
}

}  // namespace strata::collectives
