// How this process was launched, decided from environment variables (pure, tested).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace strata::runtime {

enum class LaunchKind { kSingle, kMpi, kEnv };
const char* launchKindName(LaunchKind kind);

struct LaunchInfo {
  LaunchKind kind = LaunchKind::kSingle;
  int rank = 0;
  int size = 1;
  int localRank = -1;   // from the launcher when it says (-1: derive from hostnames)
  std::string masterAddr;
  int masterPort = 0;
};

using EnvMap = std::map<std::string, std::string>;

// Open MPI / PMIx / MPICH variables -> kMpi; RANK + WORLD_SIZE (torchrun, Slurm-style
// scripts) -> kEnv with MASTER_ADDR / MASTER_PORT; nothing -> kSingle. Throws
// ConfigError naming the variables and their values when they are inconsistent.
LaunchInfo detectLaunch(const EnvMap& env);

// The variables detectLaunch reads, taken from the process environment.
EnvMap launchEnvironment();

// Intra-op threads of one rank (torch's at::set_num_threads): OMP_NUM_THREADS when it is set
// (the user's choice wins, as in PyTorch; of a list "4,2" the first), else the host's cores
// shared among its ranks, but never more than the cores this rank may run on (`ownCores`:
// ownCpuCount() in core/affinity.h). `mpirun -np 1` binds its rank to one core, and two
// threads time-sliced on one core made a small CNN's step 2.8x slower (7.7 against 2.9 ms).
// At least 1. CPU kernels that split a reduction among threads (LayerNorm's weight and bias
// gradients, a full sum) round differently for another count, so runs compared bitwise
// across layouts set the same OMP_NUM_THREADS (docs/pipeline.md). Throws ConfigError naming
// the variable and its value when it is not a positive integer.
int intraOpThreads(const EnvMap& env, int hostCores, int ownCores, int localRanks);

// STRATA_HOSTS=k splits the ranks of each real host into k pretend hosts (contiguous
// blocks of local ranks), so the inter-host code paths run on one machine. Returns one
// host name per rank. k <= 1 returns realHosts unchanged.
std::vector<std::string> pretendHosts(const std::vector<std::string>& realHosts, int hostsPerRealHost);

}  // namespace strata::runtime
