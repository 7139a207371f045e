// gtest main for tests run under mpirun: every rank runs every test; only rank 0 prints
// the usual gtest report, the other ranks print just their failures (tagged with the
// rank), and every rank exits with the same status (the worst one) so mpirun and CTest
// see a failure wherever it happened.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <exception>

#include "strata/runtime.h"

namespace {

// On ranks != 0: one line per failed assertion and per failed test, nothing else.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                 r.line_number(), r.message());
    std::fflush(stderr);
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (!info.result()->Failed()) return;
    std::fprintf(stderr, "[rank %d] [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(), info.name());
    std::fflush(stderr);
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  try {
    strata::init(argc, argv);  // MPI_Init_thread under mpirun
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata::init failed: %s\n", e.what());
    return 2;
  }
  // Without mpirun the runtime is single-process and has not touched MPI: run as an MPI
  // singleton so the reference calls still work.
  int mpiInitialised = 0;
  MPI_Initialized(&mpiInitialised);
  const bool weInitMpi = !mpiInitialised;
  if (weInitMpi) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  }

  const int rank = strata::rank();
  if (rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    delete listeners.Release(listeners.default_xml_generator());  // rank 0 writes --gtest_output
    listeners.Append(new FailurePrinter(rank));
  }

  const int localStatus = RUN_ALL_TESTS() == 0 ? 0 : 1;
  int status = localStatus;
  MPI_Allreduce(&localStatus, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && status != localStatus) {
    std::fprintf(stderr, "[rank 0] another rank had failures (see its [rank N] lines above)\n");
  }
  std::fflush(stdout);
  std::fflush(stderr);
  strata::finalize();  // finalises MPI when the runtime initialised it
  if (weInitMpi) MPI_Finalize();
  return status;
}
