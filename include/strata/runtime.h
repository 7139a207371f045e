// Process-wide runtime: bootstrap, the world group, sub-groups, the job config.
//
//   strata::init(argc, argv);   // reads --config FILE or STRATA_CONFIG
//   ... strata::rank(), strata::size(), strata::world().allreduce(...) ...
//   strata::finalize();
//
// Launch: under `mpirun` (MPI only exchanges the store address), with torchrun/Slurm
// style variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) through a TCP
// store, or as a single process with no launcher at all.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "strata/group.h"

namespace strata {

struct InitOptions {
  std::string configPath;  // a JSON job config file; empty: STRATA_CONFIG or defaults
  std::string configJson;  // or the config text itself (takes precedence over the path)
  // Overrides (empty / zero: config, then environment, then defaults).
  std::string transport;                  // auto | shm | tcp
  std::chrono::milliseconds timeout{0};
};

// Initialises the runtime. On a bad config or launch environment every rank throws
// strata::ConfigError naming the field, the value and what is allowed, before any rank
// waits for another. Calling init twice throws.
void init(int argc, char** argv);
void init(const InitOptions& options);
// Tears the runtime down (idempotent): closes groups, stops threads, finalises MPI.
void finalize();
bool isInitialized();

int rank();
int size();
int local_rank();
int local_size();
int node();       // index of this rank's host (pretend hosts count with STRATA_HOSTS)
int num_nodes();
const std::string& hostname();

// The group of all ranks.
Group& world();
// A group of the given world ranks (ascending, distinct). Collective over those ranks
// only; every member must create the same groups in the same order.
std::shared_ptr<Group> newGroup(const std::vector<int>& ranks);

// The effective job config as JSON text (what was validated and is in force).
std::string configJson();
// output_dir of the job config.
std::string outputDir();

// Whether training should stop at this step boundary: SIGTERM/SIGINT (a spot reclaim,
// Ctrl-C), a rule's StopTraining action, or another rank's request. Collective over the
// world (every rank calls it at the same step boundary) so all ranks agree; without init it
// reports this process's own requests.
bool should_stop();
// Why (empty while nobody asked): "signal Terminated", "rule LossNotDecreasing: ...".
std::string stop_reason();

}  // namespace strata
