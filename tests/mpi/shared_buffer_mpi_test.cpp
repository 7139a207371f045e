// The zero-copy AllReduce (Group::allocateShared, docs/collectives.md) in real processes:
// exact inputs give exactly MPI's result; random float inputs give bitwise the same result
// on every rank and, on one host, bitwise a naive left-to-right sum in rank order. Runs in
// every layout tests/mpi/CMakeLists.txt registers (np2, np4, tcp, pretend hosts): where no
// rank shares its host the buffer is ordinary memory and the staged algorithms run.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mpi/left_to_right.h"
#include "strata/group.h"
#include "strata/runtime.h"

namespace {

using strata::DType;
using strata::ReduceOp;

// Whether every rank of the world shares its host with a peer over shared memory.
bool everyRankPeerMapped(const strata::SharedBuffer& buffer) {
  int mine = buffer.peerMapped() ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

std::string expectedAlgo(const strata::SharedBuffer& buffer) {
  if (!everyRankPeerMapped(buffer)) return "";
  return strata::num_nodes() > 1 ? "hierarchical_direct" : "shm_direct";
}

// Small integers in float32/float64 (every sum exact in any order): equal to MPI's sum.
TEST(SharedBufferMpi, ExactSumsEqualMpi) {
  const int rank = strata::rank();
  const size_t maxCount = (size_t{1} << 20) + 3;
  auto buffer = strata::world().allocateShared(maxCount * sizeof(double) + 64);
  ASSERT_EQ(buffer->size(), maxCount * sizeof(double) + 64);
  const std::string algo = expectedAlgo(*buffer);
  for (size_t count : {size_t{1}, size_t{13}, size_t{4096}, maxCount}) {
    for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
      SCOPED_TRACE(std::string(strata::dtypeName(dtype)) + " count " + std::to_string(count));
      const size_t elem = strata::dtypeBytes(dtype);
      // 3 elements in: the data need not start at the buffer's start.
      auto* data = static_cast<uint8_t*>(buffer->data()) + 3 * elem;
      std::vector<double> values(count);
      for (size_t i = 0; i < count; ++i) values[i] = static_cast<double>((i * 7 + rank * 13) % 33) - 16;
      for (size_t i = 0; i < count; ++i) {
        if (dtype == DType::kFloat32) reinterpret_cast<float*>(data)[i] = static_cast<float>(values[i]);
        else reinterpret_cast<double*>(data)[i] = values[i];
      }
      std::vector<double> want(count);
      MPI_Allreduce(values.data(), want.data(), static_cast<int>(count), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      strata::world().allreduce(data, data, count, dtype, ReduceOp::kSum);
      size_t wrong = 0;
      for (size_t i = 0; i < count; ++i) {
        const double got = dtype == DType::kFloat32 ? reinterpret_cast<float*>(data)[i] : reinterpret_cast<double*>(data)[i];
        wrong += got != want[i];
      }
      EXPECT_EQ(wrong, 0u) << "rank " << rank;
      // Between hosts the cost model keeps tcp_direct for small messages (latency-bound).
      if (!algo.empty() && (strata::num_nodes() == 1 || count == maxCount)) {
        EXPECT_EQ(strata::world().lastAllreduceAlgorithm(), algo);
      }
    }
  }
}

// Random floats (inexact sums), sum and average: every rank ends with the same bits; with
// the zero-copy path on one host they are the bits of x_0 + x_1 + ... + x_{n-1} summed left
// to right (the deterministic order), divided by n for the average.
TEST(SharedBufferMpi, RandomFloatsBitwiseEqualAcrossRanksAndNaiveSum) {
  const int rank = strata::rank();
  const size_t count = 300007;
  auto buffer = strata::world().allocateShared(count * sizeof(float));
  const bool direct = expectedAlgo(*buffer) == "shm_direct";
  float* data = static_cast<float*>(buffer->data());
  std::vector<float> all;
  const std::vector<float> input = strata::testing::randomFloatsOfEveryRank(count, 977, rank, all);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    SCOPED_TRACE(strata::reduceOpName(op));
    std::memcpy(data, input.data(), count * sizeof(float));
    strata::world().allreduce(data, data, count, DType::kFloat32, op);
    std::vector<float> rank0Result(data, data + count);
    MPI_Bcast(rank0Result.data(), static_cast<int>(count), MPI_FLOAT, 0, MPI_COMM_WORLD);
    EXPECT_EQ(std::memcmp(rank0Result.data(), data, count * sizeof(float)), 0)
        << "rank " << rank << " differs from rank 0";
    if (!direct) continue;  // the staged and inter-host algorithms sum in other orders
    EXPECT_EQ(strata::testing::differFromLeftToRight(all, count, op, data), 0u)
        << "elements differing from the left-to-right sum, rank " << rank;
  }
}

}  // namespace
