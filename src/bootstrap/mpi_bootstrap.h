// The only use of MPI in Strata: learn rank and size under mpirun, and share a few
// strings (the rendezvous store's address, hostnames). x.cpp / no_x.cpp pair: CMake
// compiles mpi_bootstrap.cpp or no_mpi_bootstrap.cpp.
#pragma once

#include <string>
#include <vector>

namespace strata::bootstrap {

bool mpiCompiledIn();
// MPI_Init_thread unless already initialised; returns {rank, size}.
std::pair<int, int> mpiInit();
// Every rank's string, in rank order.
std::vector<std::string> mpiAllGatherStrings(const std::string& mine);
// MPI_Finalize if we initialised MPI and it is not finalised yet.
void mpiFinalize();

}  // namespace strata::bootstrap
