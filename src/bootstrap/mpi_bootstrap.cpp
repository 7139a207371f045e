#include "bootstrap/mpi_bootstrap.h"

#include <mpi.h>

#include "core/errors.h"

namespace strata::bootstrap {
namespace {
bool weInitialised = false;

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  STRATA_THROW(StoreError, call, " failed: ", std::string(text, static_cast<size_t>(len)));
}
}  // namespace

bool mpiCompiledIn() { return true; }

std::pair<int, int> mpiInit() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    // FUNNELED: Strata calls MPI only from the thread that runs init/finalize (its own
    // threads never do). Open MPI 4.1 makes every later MPI call of the application about
    // 0.3 us slower at MULTIPLE (bench/RESULTS.md); an application that needs MULTIPLE
    // initialises MPI itself before strata::init.
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    weInitialised = true;
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return {rank, size};
}

std::vector<std::string> mpiAllGatherStrings(const std::string& mine) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int myLen = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(size));
  check(MPI_Allgather(&myLen, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
  std::vector<int> displs(static_cast<size_t>(size));
  int total = 0;
  for (int i = 0; i < size; ++i) {
    displs[i] = total;
    total += lens[i];
  }
  std::string all(static_cast<size_t>(total), '\0');
  check(MPI_Allgatherv(mine.data(), myLen, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR,
                       MPI_COMM_WORLD),
        "MPI_Allgatherv");
  std::vector<std::string> out;
  for (int i = 0; i < size; ++i) out.push_back(all.substr(displs[i], lens[i]));
  return out;
}

void mpiFinalize() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (weInitialised && !finalised) MPI_Finalize();
  weInitialised = false;
}

}  // namespace strata::bootstrap
