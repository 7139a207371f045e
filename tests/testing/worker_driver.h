// What a driver test of checkpoint_train_worker (tests/checkpoint/process_test.cpp,
// tests/launch/exit_status_test.cpp) launches: the programs and the run folder that
// strata_worker_driver_test (tests/CMakeLists.txt) compiles in, and the environment Open MPI
// needs to start the jobs in our containers.
#pragma once

#include <cstdlib>
#include <string>

namespace strata::testing {

inline const std::string kTrainWorker = STRATA_TRAIN_WORKER;
inline const std::string kStrataCli = STRATA_CLI;
inline const std::string kMpiexec = STRATA_MPIEXEC;  // empty when built without MPI
inline const std::string kRunRoot = STRATA_RUN_DIR;  // one folder per test below it

// Open MPI refuses root and more ranks than cores unless told; values already set win.
inline void allowMpiexecInContainers() {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
}

}  // namespace strata::testing
