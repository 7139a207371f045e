// Shared buffers (Communicator::allocateShared) and the zero-copy AllReduce over them
// (shm_direct, hierarchical_direct): every dtype and op against the naive reference, at
// two offsets inside the buffer, bitwise identity across ranks (and with a left-to-right
// sum in rank order), the cost model's choice, and the misuse and failure paths.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <tuple>

#include "collectives/reference.h"
#include "core/errors.h"
#include "testing/rank_harness.h"

namespace strata::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr DType kAllTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                               DType::kInt32,   DType::kInt64,   DType::kUInt8};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProd};

const char* directAlgoFor(TransportKind kind) {
  return kind == TransportKind::kHierarchical ? "hierarchical_direct" : "shm_direct";
}

HarnessOptions directOptions(TransportKind kind) {
  HarnessOptions opts;
  opts.kind = kind;
  opts.connectTcp = kind != TransportKind::kShm;
  opts.allreduceAlgo = directAlgoFor(kind);
  // Several blocks per shard at the larger counts (the default, 128 KiB, is for speed).
  opts.directBlockBytes = 4096;
  return opts;
}

class DirectSweep : public ::testing::TestWithParam<std::tuple<TransportKind, int, size_t>> {};

TEST_P(DirectSweep, EveryTypeAndOpMatchesTheReference) {
  const auto [kind, worldSize, count] = GetParam();
  runRanks(worldSize, directOptions(kind), [&, kind = kind, count = count](collectives::Communicator& comm) {
    // Room for the largest element type at the largest offset used below.
    auto buffer = comm.allocateShared((count + 8) * 8);
    ASSERT_EQ(buffer->peerMapped(), comm.size() > 1);
    int variant = 0;
    for (DType dtype : kAllTypes) {
      for (ReduceOp op : kAllOps) {
        const size_t elem = dtypeBytes(dtype);
        // Offset 0, or 3 elements in: shards need not start on the buffer's cache lines.
        const size_t offset = (variant++ % 2) * 3 * elem;
        const std::vector<uint8_t> input = makeInput(comm.rank(), count, dtype, op);
        const std::vector<uint8_t> expected = referenceAllReduce(comm.size(), count, dtype, op);
        uint8_t* data = static_cast<uint8_t*>(buffer->mine()) + offset;
        if (!input.empty()) std::memcpy(data, input.data(), input.size());
        comm.allReduce(data, data, count, dtype, op);
        const std::vector<uint8_t> out(data, data + count * elem);
        ASSERT_EQ(firstMismatch(out, expected, dtype), -1)
            << dtypeName(dtype) << " " << reduceOpName(op) << " offset " << offset << " rank " << comm.rank();
        if (comm.size() > 1) {
          ASSERT_EQ(std::string(algoName(comm.lastAllReduceAlgo())), directAlgoFor(kind));
        }
      }
    }
  });
}

std::string sweepName(const ::testing::TestParamInfo<DirectSweep::ParamType>& info) {
  return std::string(transportKindName(std::get<0>(info.param))) + "_n" + std::to_string(std::get<1>(info.param)) +
         "_c" + std::to_string(std::get<2>(info.param));
}

// 4 KiB blocks (directOptions), so the largest count spans several blocks per shard.
const auto kCounts = ::testing::Values(size_t{0}, size_t{1}, size_t{13}, size_t{4096}, size_t{(1 << 16) + 3});

INSTANTIATE_TEST_SUITE_P(OneHost, DirectSweep,
                         ::testing::Combine(::testing::Values(TransportKind::kShm), ::testing::Values(1, 2, 3, 4, 7),
                                            kCounts),
                         sweepName);
// Two pretend hosts of 2 and 3 ranks each.
INSTANTIATE_TEST_SUITE_P(TwoHosts, DirectSweep,
                         ::testing::Combine(::testing::Values(TransportKind::kHierarchical), ::testing::Values(4, 6),
                                            kCounts),
                         sweepName);

// Random (inexact) inputs: every rank's result has the same bits, and on one host they
// equal a left-to-right reduction in ascending rank order in the kernels' accumulator type.
template <typename T, typename Acc>
std::vector<uint8_t> leftToRight(const std::vector<std::vector<uint8_t>>& inputs, size_t count, ReduceOp op) {
  std::vector<uint8_t> out(count * sizeof(T));
  for (size_t i = 0; i < count; ++i) {
    Acc acc = 0;
    for (size_t r = 0; r < inputs.size(); ++r) {
      T v;
      std::memcpy(&v, inputs[r].data() + i * sizeof(T), sizeof(T));
      acc = r == 0 ? static_cast<Acc>(v) : acc + static_cast<Acc>(v);
    }
    if (op == ReduceOp::kAvg) acc = acc / static_cast<Acc>(inputs.size());
    const T result = static_cast<T>(acc);
    std::memcpy(out.data() + i * sizeof(T), &result, sizeof(T));
  }
  return out;
}

std::vector<uint8_t> randomInput(int rank, size_t count, DType dtype) {
  std::mt19937 rng(1234 + static_cast<unsigned>(rank));
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<uint8_t> bytes(count * dtypeBytes(dtype));
  collectives::dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = reinterpret_cast<T*>(bytes.data());
    for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(dist(rng) * 1000.f);
  });
  return bytes;
}

class BitwiseIdentity : public ::testing::TestWithParam<std::tuple<TransportKind, int>> {};

TEST_P(BitwiseIdentity, EveryRankGetsTheSameBits) {
  const auto [kind, worldSize] = GetParam();
  constexpr size_t kCount = 100003;
  const DType types[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kAvg};
  std::vector<std::vector<uint8_t>> inputs[4], outputs[4][2];
  for (auto& t : inputs) t.resize(worldSize);
  for (auto& t : outputs)
    for (auto& o : t) o.resize(worldSize);
  runRanks(worldSize, directOptions(kind), [&](collectives::Communicator& comm) {
    auto buffer = comm.allocateShared(kCount * 8);
    for (int t = 0; t < 4; ++t) {
      for (int o = 0; o < 2; ++o) {
        const size_t numBytes = kCount * dtypeBytes(types[t]);
        inputs[t][comm.rank()] = randomInput(comm.rank(), kCount, types[t]);
        std::memcpy(buffer->mine(), inputs[t][comm.rank()].data(), numBytes);
        comm.allReduce(buffer->mine(), buffer->mine(), kCount, types[t], ops[o]);
        outputs[t][o][comm.rank()].assign(buffer->mine(), buffer->mine() + numBytes);
      }
    }
  });
  for (int t = 0; t < 4; ++t) {
    for (int o = 0; o < 2; ++o) {
      SCOPED_TRACE(std::string(dtypeName(types[t])) + " " + reduceOpName(ops[o]));
      for (int r = 1; r < worldSize; ++r) ASSERT_EQ(outputs[t][o][r], outputs[t][o][0]) << "rank " << r;
      if (kind != TransportKind::kShm) continue;  // hosts sum their own ranks first
      std::vector<uint8_t> want;
      switch (types[t]) {
        case DType::kFloat32: want = leftToRight<float, float>(inputs[t], kCount, ops[o]); break;
        case DType::kFloat64: want = leftToRight<double, double>(inputs[t], kCount, ops[o]); break;
        case DType::kFloat16: want = leftToRight<c10::Half, float>(inputs[t], kCount, ops[o]); break;
        default: want = leftToRight<c10::BFloat16, float>(inputs[t], kCount, ops[o]); break;
      }
      ASSERT_EQ(firstMismatch(outputs[t][o][0], want, types[t]), -1);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Collectives, BitwiseIdentity,
                         ::testing::Values(std::make_tuple(TransportKind::kShm, 3),
                                           std::make_tuple(TransportKind::kShm, 4),
                                           std::make_tuple(TransportKind::kShm, 7),
                                           std::make_tuple(TransportKind::kHierarchical, 6)),
                         [](const auto& info) {
                           return std::string(transportKindName(std::get<0>(info.param))) + "_n" +
                                  std::to_string(std::get<1>(info.param));
                         });

// Left to the cost model, an in-place call in a shared buffer takes the zero-copy path,
// whatever its size; the same call on ordinary memory never does.
TEST(SharedBuffer, CostModelPicksTheDirectPath) {
  HarnessOptions opts;
  opts.connectTcp = false;
  runRanks(2, opts, [](collectives::Communicator& comm) {
    auto buffer = comm.allocateShared(1 << 22);
    float* data = reinterpret_cast<float*>(buffer->mine());
    for (size_t count : {size_t{16}, size_t{1} << 20}) {
      for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(comm.rank() + i % 3);
      comm.allReduce(data, data, count, DType::kFloat32, ReduceOp::kSum);
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(data[i], static_cast<float>(1 + 2 * (i % 3))) << i;
      const std::string algo = algoName(comm.lastAllReduceAlgo());
      EXPECT_EQ(algo, "shm_direct") << count;
    }
    std::vector<float> plain(1 << 20, 1.f);
    comm.allReduce(plain.data(), plain.data(), plain.size(), DType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(std::string(algoName(comm.lastAllReduceAlgo())), "shm_chunked");
    EXPECT_EQ(plain[12345], 2.f);
  });
}

TEST(SharedBuffer, WithoutLocalPeersItIsPrivateMemoryAndStillReduces) {
  HarnessOptions opts;
  opts.kind = TransportKind::kTcp;
  runRanks(3, opts, [](collectives::Communicator& comm) {
    auto buffer = comm.allocateShared(4000);
    EXPECT_FALSE(buffer->peerMapped());
    auto* data = reinterpret_cast<int32_t*>(buffer->mine());
    for (int i = 0; i < 1000; ++i) data[i] = comm.rank() + i;
    comm.allReduce(data, data, 1000, DType::kInt32, ReduceOp::kSum);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(data[i], 3 + 3 * i) << i;
  });
}

TEST(SharedBuffer, IdsAreEqualAcrossRanksAndMemoryIsZeroed) {
  HarnessOptions opts;
  opts.connectTcp = false;
  std::atomic<uint64_t> ids[2][3] = {};
  runRanks(3, opts, [&](collectives::Communicator& comm) {
    for (int k = 0; k < 2; ++k) {
      auto buffer = comm.allocateShared(10000);
      ids[k][comm.rank()] = buffer->id();
      for (size_t i = 0; i < buffer->size(); ++i) ASSERT_EQ(buffer->mine()[i], 0) << i;
    }
  });
  for (int k = 0; k < 2; ++k) {
    EXPECT_NE(ids[k][0].load(), 0u);
    EXPECT_EQ(ids[k][1].load(), ids[k][0].load());
    EXPECT_EQ(ids[k][2].load(), ids[k][0].load());
  }
  EXPECT_NE(ids[0][0].load(), ids[1][0].load());
}

TEST(SharedBuffer, MismatchedSizesFailOnEveryRankAndTheGroupGoesOn) {
  HarnessOptions opts;
  opts.connectTcp = false;
  opts.timeout = std::chrono::seconds(20);
  std::atomic<int> errors{0};
  runRanks(3, opts, [&](collectives::Communicator& comm) {
    try {
      comm.allocateShared(comm.rank() == 1 ? 8192 : 4096);
      ADD_FAILURE() << "rank " << comm.rank() << " allocated despite different sizes";
    } catch (const MismatchError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("allocate_shared: rank 1 asked for 8192 bytes but rank 0 asked for 4096"), std::string::npos)
          << what;
      ++errors;
    }
    // Not a failed group: the next allocation and collective work.
    auto buffer = comm.allocateShared(4096);
    auto* data = reinterpret_cast<float*>(buffer->mine());
    data[0] = 1.f;
    comm.allReduce(data, data, 1, DType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(data[0], 3.f);
  });
  EXPECT_EQ(errors.load(), 3);
}

// Calls the zero-copy path cannot serve consistently are mismatches on every rank: a
// different offset in the buffer, or ordinary memory on one rank.
class InconsistentPlacement : public ::testing::TestWithParam<std::string> {};

TEST_P(InconsistentPlacement, FailsOnEveryRankNamingTheBuffer) {
  HarnessOptions opts;
  opts.connectTcp = false;
  opts.timeout = std::chrono::seconds(20);
  std::atomic<int> errors{0};
  runRanks(3, opts, [&](collectives::Communicator& comm) {
    auto buffer = comm.allocateShared(1 << 16);
    std::vector<float> plain(1024, 1.f);
    float* data = reinterpret_cast<float*>(buffer->mine());
    if (comm.rank() == 2) data = GetParam() == "offset" ? data + 16 : plain.data();
    try {
      comm.allReduce(data, data, 1024, DType::kFloat32, ReduceOp::kSum);
      ADD_FAILURE() << "rank " << comm.rank() << " reduced inconsistent places";
    } catch (const MismatchError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("in shared buffer"), std::string::npos) << what;
      ++errors;
    }
  });
  EXPECT_EQ(errors.load(), 3);
}

INSTANTIATE_TEST_SUITE_P(Collectives, InconsistentPlacement, ::testing::Values("offset", "ordinary_memory"));

// A rank that gives up (abort) right after allocating, while its peers are inside the
// allocation or the zero-copy reduction: they fail fast with its reason instead of waiting
// for the timeout.
TEST(SharedBuffer, AnAbortingPeerFailsTheOthersFast) {
  HarnessOptions opts;
  opts.connectTcp = false;
  opts.allreduceAlgo = "shm_direct";
  opts.timeout = std::chrono::seconds(60);
  std::atomic<int> failed{0};
  runRanks(3, opts, [&](collectives::Communicator& comm) {
    const auto start = Clock::now();
    if (comm.rank() == 1) {
      comm.allocateShared(1 << 20);
      comm.abort("test: rank 1 gives up");
      return;
    }
    try {
      // The abort may land while the peers still finish the allocation: either call fails.
      auto buffer = comm.allocateShared(1 << 20);
      float* data = reinterpret_cast<float*>(buffer->mine());
      comm.allReduce(data, data, 1 << 18, DType::kFloat32, ReduceOp::kSum);
      ADD_FAILURE() << "no error";
    } catch (const NetworkError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 1 gives up"), std::string::npos) << e.what();
      ++failed;
    }
    // Not the timeout (60 s): the abort ended the wait. Generous, the machine may be loaded.
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(30));
  });
  EXPECT_EQ(failed.load(), 2);
}

TEST(SharedBuffer, ReleasedBuffersAreForgotten) {
  HarnessOptions opts;
  opts.connectTcp = false;
  runRanks(2, opts, [&](collectives::Communicator& comm) {
    for (int round = 0; round < 3; ++round) {
      auto buffer = comm.allocateShared(1 << 20);
      double* data = reinterpret_cast<double*>(buffer->mine());
      for (int i = 0; i < 1000; ++i) data[i] = comm.rank() * 10.0 + round;
      comm.allReduce(data, data, 1000, DType::kFloat64, ReduceOp::kMax);
      EXPECT_EQ(data[999], 10.0 + round);
    }
    std::vector<double> plain(1 << 17, 1.0);
    comm.allReduce(plain.data(), plain.data(), plain.size(), DType::kFloat64, ReduceOp::kSum);
    EXPECT_EQ(std::string(algoName(comm.lastAllReduceAlgo())), "shm_chunked");
    EXPECT_EQ(plain[7], 2.0);
  });
}

}  // namespace
}  // namespace strata::testing
