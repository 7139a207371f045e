// gtest main for multi-rank tests: init the runtime, keep gtest output on rank 0 only,
// and agree on the failure count so every rank exits with the same status.
#include <gtest/gtest.h>

#include <cstdio>

#include "strata/runtime.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  strata::init(argc, argv);
  if (strata::rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  strata::world().allreduce(&failed, &failed, 1, strata::DType::kInt32, strata::ReduceOp::kMax);
  strata::finalize();
  return failed;
}
