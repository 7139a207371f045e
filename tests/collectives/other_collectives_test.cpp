// Broadcast, allgather, reduce-scatter, barrier and point-to-point on every transport,
// and the failure paths: mismatched calls, a rank that never arrives, a failed group.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <tuple>

#include "collectives/reference.h"
#include "core/errors.h"
#include "testing/rank_harness.h"

namespace strata::testing {
namespace {

using Clock = std::chrono::steady_clock;

class CollectivesSweep : public ::testing::TestWithParam<std::tuple<TransportKind, int>> {};

HarnessOptions optionsFor(TransportKind kind) {
  HarnessOptions opts;
  opts.kind = kind;
  opts.shmSlotBytes = 64 << 10;  // forces several chunks
  return opts;
}

TEST_P(CollectivesSweep, BroadcastFromEveryRoot) {
  const auto [kind, worldSize] = GetParam();
  runRanks(worldSize, optionsFor(kind), [](collectives::Communicator& comm) {
    for (size_t count : {size_t{0}, size_t{13}, size_t{100003}}) {
      for (int root = 0; root < comm.size(); ++root) {
        std::vector<int64_t> data(count, -1);
        if (comm.rank() == root)
          for (size_t i = 0; i < count; ++i) data[i] = static_cast<int64_t>(i * 31 + root);
        comm.broadcast(data.data(), count, DType::kInt64, root);
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(data[i], static_cast<int64_t>(i * 31 + root)) << i;
      }
    }
  });
}

TEST_P(CollectivesSweep, AllGatherInRankOrder) {
  const auto [kind, worldSize] = GetParam();
  runRanks(worldSize, optionsFor(kind), [](collectives::Communicator& comm) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{40001}}) {
      std::vector<float> mine(count);
      for (size_t i = 0; i < count; ++i) mine[i] = static_cast<float>(comm.rank() * 1000 + i % 997);
      std::vector<float> all(count * comm.size(), -1.f);
      comm.allGather(mine.data(), all.data(), count, DType::kFloat32);
      for (int r = 0; r < comm.size(); ++r)
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(all[r * count + i], static_cast<float>(r * 1000 + i % 997)) << "r=" << r << " i=" << i;
    }
  });
}

TEST_P(CollectivesSweep, ReduceScatterGivesEachRankItsBlock) {
  const auto [kind, worldSize] = GetParam();
  runRanks(worldSize, optionsFor(kind), [](collectives::Communicator& comm) {
    const int n = comm.size();
    for (size_t count : {size_t{0}, size_t{7}, size_t{30011}}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
        std::vector<double> in(count * n);
        for (size_t j = 0; j < in.size(); ++j) in[j] = static_cast<double>((comm.rank() + 1) * (j % 11));
        std::vector<double> out(count, -1);
        comm.reduceScatter(in.data(), out.data(), count, DType::kFloat64, op);
        for (size_t i = 0; i < count; ++i) {
          const double v = static_cast<double>((comm.rank() * count + i) % 11);
          const double sum = v * n * (n + 1) / 2;
          const double want = op == ReduceOp::kSum ? sum : op == ReduceOp::kMax ? v * n : sum / n;
          ASSERT_EQ(out[i], want) << reduceOpName(op) << " i=" << i;
        }
      }
    }
  });
}

TEST_P(CollectivesSweep, BarrierAndPointToPoint) {
  const auto [kind, worldSize] = GetParam();
  runRanks(worldSize, optionsFor(kind), [](collectives::Communicator& comm) {
    comm.barrier();
    comm.barrier();
    if (comm.size() < 2) return;
    // A ring of tagged messages: send to the right, receive from the left.
    const int n = comm.size();
    std::vector<int32_t> out(1000, comm.rank()), in(1000, -1);
    auto recv = comm.postRecv(in.data(), in.size() * 4, (comm.rank() + n - 1) % n, 77);
    auto send = comm.postSend(out.data(), out.size() * 4, (comm.rank() + 1) % n, 77);
    recv->wait(std::chrono::seconds(30));
    send->wait(std::chrono::seconds(30));
    for (int32_t v : in) ASSERT_EQ(v, (comm.rank() + n - 1) % n);
  });
}

INSTANTIATE_TEST_SUITE_P(Collectives, CollectivesSweep,
                         ::testing::Combine(::testing::Values(TransportKind::kShm, TransportKind::kTcp,
                                                              TransportKind::kHierarchical),
                                            ::testing::Values(1, 2, 3, 4, 7)),
                         [](const auto& info) {
                           return std::string(transportKindName(std::get<0>(info.param))) + "_n" +
                                  std::to_string(std::get<1>(info.param));
                         });

class FailureTest : public ::testing::TestWithParam<TransportKind> {};

TEST_P(FailureTest, MismatchedCountsFailOnEveryRank) {
  HarnessOptions opts;
  opts.kind = GetParam();
  opts.timeout = std::chrono::seconds(20);
  std::atomic<int> mismatches{0};
  runRanks(4, opts, [&](collectives::Communicator& comm) {
    const size_t count = comm.rank() == 2 ? 20 : 10;
    std::vector<float> x(20, 1.f);
    try {
      comm.allReduce(x.data(), x.data(), count, DType::kFloat32, ReduceOp::kSum);
    } catch (const MismatchError& e) {
      // shm compares signatures directly; over TCP the ranks that receive rank 2's
      // message see the wrong size, and every other rank learns of it from the first
      // failing rank's record: all of them report a mismatch.
      const std::string what = e.what();
      EXPECT_NE(what.find("mismatch"), std::string::npos) << what;
      ++mismatches;
      // The group is failed from now on: the next call throws at once (microseconds), not
      // after waiting for its 20 s timeout.
      const auto start = Clock::now();
      EXPECT_THROW(comm.barrier(), Error);
      EXPECT_LT(Clock::now() - start, opts.timeout / 2);
      return;
    }
    ADD_FAILURE() << "rank " << comm.rank() << " did not detect the mismatch";
  });
  EXPECT_EQ(mismatches.load(), 4);
}

// On one host the ranks' signatures meet in the segment, so both calls are named; over TCP
// the frames' tags differ and each rank names only its own call (the log does).
TEST(ShmFailureTest, DifferentCollectivesFailWithBothNamed) {
  HarnessOptions opts;
  opts.kind = TransportKind::kShm;
  opts.timeout = std::chrono::seconds(20);
  runRanks(2, opts, [&](collectives::Communicator& comm) {
    std::vector<float> x(8, 1.f);
    try {
      if (comm.rank() == 0) {
        comm.allReduce(x.data(), x.data(), 8, DType::kFloat32, ReduceOp::kSum);
      } else {
        comm.broadcast(x.data(), 8, DType::kFloat32, 0);
      }
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("allreduce seq=1 float32 sum count=8"), std::string::npos) << what;
      EXPECT_NE(what.find("broadcast seq=1 float32 count=8 root=0"), std::string::npos) << what;
    }
  });
}

TEST_P(FailureTest, ARankThatNeverArrivesTimesOutNamingIt) {
  HarnessOptions opts;
  opts.kind = GetParam();
  opts.timeout = std::chrono::milliseconds(500);
  std::atomic<int> timeouts{0};
  runRanks(3, opts, [&](collectives::Communicator& comm) {
    if (comm.rank() == 1) return;  // never calls the collective
    std::vector<float> x(16, 1.f);
    const auto start = Clock::now();
    try {
      comm.allReduce(x.data(), x.data(), 16, DType::kFloat32, ReduceOp::kSum);
      ADD_FAILURE() << "no timeout";
    } catch (const NetworkError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("rank 1"), std::string::npos) << what;
      ++timeouts;
    }
    // The 500 ms timeout, within ten times that.
    EXPECT_LT(Clock::now() - start, 10 * opts.timeout);
  });
  EXPECT_EQ(timeouts.load(), 2);
}

INSTANTIATE_TEST_SUITE_P(Collectives, FailureTest,
                         ::testing::Values(TransportKind::kShm, TransportKind::kTcp),
                         [](const auto& info) { return std::string(transportKindName(info.param)); });

}  // namespace
}  // namespace strata::testing
