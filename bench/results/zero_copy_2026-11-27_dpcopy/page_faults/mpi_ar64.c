#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  size_t bytes = (size_t)atoi(argv[1]) << 20; size_t count = bytes/4; int it = atoi(argv[2]);
  float* b = aligned_alloc(4096, bytes); memset(b, 0, bytes);
  MPI_Allreduce(MPI_IN_PLACE, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  for (int r = 0; r < 3; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < it; ++i) MPI_Allreduce(MPI_IN_PLACE, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) / it;
    if (rank == 0) printf("%zu bytes: %.1f us  %.2f GB/s\n", bytes, t*1e6, bytes/t/1e9);
  }
  MPI_Finalize();
}
