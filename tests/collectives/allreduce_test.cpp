// Every AllReduce algorithm and transport against the naive reference: world sizes
// 1, 2, 3, 4, 7, 8 x counts 0, 1, 13, 4096, 2^20+3 x every dtype and op, with ranks as
// threads over real shared memory and loopback TCP.
#include <gtest/gtest.h>

#include <tuple>

#include "collectives/reference.h"
#include "testing/rank_harness.h"

namespace strata::testing {
namespace {

constexpr DType kAllTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                               DType::kInt32,   DType::kInt64,   DType::kUInt8};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProd};

class AllReduceSweep : public ::testing::TestWithParam<std::tuple<TransportKind, int, size_t>> {};

TEST_P(AllReduceSweep, EveryTypeAndOpMatchesTheReference) {
  const auto [kind, worldSize, count] = GetParam();
  HarnessOptions opts;
  opts.kind = kind;
  opts.connectTcp = kind != TransportKind::kShm;
  // The reference results once, for every rank to compare with (each rank computing them
  // itself cost n^2 x count per case, most of this sweep's time at 7-8 ranks).
  std::vector<std::vector<uint8_t>> expectedByVariant;
  for (DType dtype : kAllTypes)
    for (ReduceOp op : kAllOps) expectedByVariant.push_back(referenceAllReduce(worldSize, count, dtype, op));
  runRanks(worldSize, opts, [&, count = count](collectives::Communicator& comm) {
    size_t variant = 0;
    for (DType dtype : kAllTypes) {
      for (ReduceOp op : kAllOps) {
        const std::vector<uint8_t> input = makeInput(comm.rank(), count, dtype, op);
        const std::vector<uint8_t>& expected = expectedByVariant[variant];
        std::vector<uint8_t> out = input;
        const bool inPlace = (variant++ % 2) == 0;
        if (inPlace) {
          comm.allReduce(out.data(), out.data(), count, dtype, op);
        } else {
          std::fill(out.begin(), out.end(), 0xAB);
          comm.allReduce(input.data(), out.data(), count, dtype, op);
        }
        const long bad = firstMismatch(out, expected, dtype);
        ASSERT_EQ(bad, -1) << dtypeName(dtype) << " " << reduceOpName(op) << (inPlace ? " in-place" : " out-of-place")
                           << " rank " << comm.rank() << " algo " << algoName(comm.lastAllReduceAlgo());
      }
    }
  });
}

std::string sweepName(const ::testing::TestParamInfo<AllReduceSweep::ParamType>& info) {
  return std::string(transportKindName(std::get<0>(info.param))) + "_n" + std::to_string(std::get<1>(info.param)) +
         "_c" + std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Collectives, AllReduceSweep,
                         ::testing::Combine(::testing::Values(TransportKind::kShm, TransportKind::kTcp,
                                                              TransportKind::kHierarchical),
                                            ::testing::Values(1, 2, 3, 4, 7, 8),
                                            ::testing::Values(size_t{0}, size_t{1}, size_t{13}, size_t{4096},
                                                              size_t{(1 << 20) + 3})),
                         sweepName);

// Each algorithm forced on the sizes it supports, so the cost model's choice does not
// hide one of them from the tests.
class ForcedAlgorithm : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(ForcedAlgorithm, MatchesTheReference) {
  const auto [algo, worldSize] = GetParam();
  HarnessOptions opts;
  opts.kind = algo == "hierarchical" ? TransportKind::kHierarchical : TransportKind::kShm;
  opts.allreduceAlgo = algo;
  opts.shmSlotBytes = 64 << 10;  // several chunks even for mid-sized messages
  // Hierarchical needs several ranks per (pretend) host.
  const int n = algo == "hierarchical" ? 2 * worldSize : worldSize;
  runRanks(n, opts, [&, algo = algo](collectives::Communicator& comm) {
    for (size_t count : {size_t{1}, size_t{13}, size_t{5000}, size_t{300000}}) {
      const size_t numBytes = count * 4;
      if (algo == "shm_oneshot" && numBytes > (64 << 10)) continue;
      const auto input = makeInput(comm.rank(), count, DType::kFloat32, ReduceOp::kSum);
      const auto expected = referenceAllReduce(comm.size(), count, DType::kFloat32, ReduceOp::kSum);
      std::vector<uint8_t> out(input.size());
      comm.allReduce(input.data(), out.data(), count, DType::kFloat32, ReduceOp::kSum);
      ASSERT_EQ(std::string(algoName(comm.lastAllReduceAlgo())), algo);
      ASSERT_EQ(firstMismatch(out, expected, DType::kFloat32), -1) << algo << " count " << count;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Collectives, ForcedAlgorithm,
                         ::testing::Combine(::testing::Values("shm_oneshot", "shm_chunked", "tcp_direct", "tcp_ring",
                                                              "hierarchical"),
                                            ::testing::Values(2, 4)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_n" + std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace strata::testing
