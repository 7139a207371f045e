#include "bootstrap/mpi_bootstrap.h"

#include "core/errors.h"

namespace strata::bootstrap {

bool mpiCompiledIn() { return false; }

std::pair<int, int> mpiInit() {
  STRATA_THROW(ConfigError, "launched by mpirun, but Strata was built without MPI (STRATA_WITH_MPI=OFF); ",
               "launch with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT instead");
}

std::vector<std::string> mpiAllGatherStrings(const std::string&) {
  STRATA_THROW(ConfigError, "Strata was built without MPI");
}

void mpiFinalize() {}

}  // namespace strata::bootstrap
