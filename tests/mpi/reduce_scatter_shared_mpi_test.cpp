// Group::reduceScatterShared in real processes, against MPI's AllReduce of the same values:
// float32 and float64, sum and avg, counts that do not divide; out == in (on one host with
// peer-mapped buffers: exactly the owners' shards written, the rest of `in` untouched),
// out == part(0) of a second buffer (every rank reads the whole result there), the
// asynchronous form, private memory (an AllReduce into all of `out`), random floats
// (bitwise equal on every rank and, zero-copy, a left-to-right sum in rank order), and a
// rank passing another offset (MismatchError on every rank). Runs in every layout that
// tests/mpi/CMakeLists.txt registers: np2, np4, TCP only, pretend hosts.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mpi/left_to_right.h"
#include "strata/errors.h"
#include "strata/group.h"
#include "strata/runtime.h"

namespace {

using strata::DType;
using strata::ReduceOp;

constexpr size_t kLargeCount = 1000003;

bool allRanks(bool mine) {
  int in = mine ? 1 : 0, all = 0;
  MPI_Allreduce(&in, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

// Whether the call takes the zero-copy path (only this rank's shard of `out` written).
bool zeroCopy(const strata::SharedBuffer& in) {
  return allRanks(in.peerMapped()) && strata::num_nodes() == 1 && strata::size() > 1;
}

// Every rank's shard, by rank, as Group::sharedShard reports it there.
std::vector<strata::Group::ShardRange> everyShard(size_t count, DType dtype) {
  const auto mine = strata::world().sharedShard(count, dtype);
  const uint64_t pair[2] = {mine.offset, mine.count};
  std::vector<uint64_t> all(2 * static_cast<size_t>(strata::size()));
  MPI_Allgather(pair, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, MPI_COMM_WORLD);
  std::vector<strata::Group::ShardRange> shards;
  for (size_t r = 0; r < all.size() / 2; ++r) shards.push_back({all[2 * r], all[2 * r + 1]});
  return shards;
}

// Exact small integers (every sum exact in any order, every average exact: n is 1, 2 or 4).
double inputValue(int rank, size_t i) {
  return static_cast<double>((i * 7 + static_cast<size_t>(rank) * 13) % 33) - 16;
}

void store(DType dtype, void* data, size_t i, double v) {
  if (dtype == DType::kFloat32)
    static_cast<float*>(data)[i] = static_cast<float>(v);
  else
    static_cast<double*>(data)[i] = v;
}

double load(DType dtype, const void* data, size_t i) {
  return dtype == DType::kFloat32 ? static_cast<const float*>(data)[i] : static_cast<const double*>(data)[i];
}

void fillInput(DType dtype, void* data, size_t count) {
  for (size_t i = 0; i < count; ++i) store(dtype, data, i, inputValue(strata::rank(), i));
}

// The elements of [begin, end) of `data` that differ from `want` (or from this rank's input).
size_t wrongIn(DType dtype, const void* data, const std::vector<double>& want, size_t begin, size_t end) {
  size_t wrong = 0;
  for (size_t i = begin; i < end; ++i) wrong += load(dtype, data, i) != want[i];
  return wrong;
}
size_t notInput(DType dtype, const void* data, size_t begin, size_t end) {
  size_t wrong = 0;
  for (size_t i = begin; i < end; ++i) wrong += load(dtype, data, i) != inputValue(strata::rank(), i);
  return wrong;
}

// MPI's AllReduce of the inputs, in double (exact), divided by n for the average.
std::vector<double> reference(size_t count, ReduceOp op) {
  std::vector<double> mine(count), sum(count);
  for (size_t i = 0; i < count; ++i) mine[i] = inputValue(strata::rank(), i);
  MPI_Allreduce(mine.data(), sum.data(), static_cast<int>(count), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (op == ReduceOp::kAvg)
    for (double& v : sum) v /= strata::size();
  return sum;
}

class ReduceScatterSharedMpi : public ::testing::TestWithParam<std::tuple<DType, ReduceOp>> {};

TEST_P(ReduceScatterSharedMpi, EqualsMpiAllReduce) {
  const auto [dtype, op] = GetParam();
  strata::Group& world = strata::world();
  const size_t elem = strata::dtypeBytes(dtype);
  auto in = world.allocateShared((kLargeCount + 3) * elem);
  auto out = world.allocateShared((kLargeCount + 3) * elem);
  const bool direct = zeroCopy(*in);
  for (size_t count : {size_t{1}, size_t{17}, kLargeCount}) {
    SCOPED_TRACE("count " + std::to_string(count) + " rank " + std::to_string(strata::rank()));
    const std::vector<double> want = reference(count, op);
    const auto shards = everyShard(count, dtype);
    const auto mine = shards[static_cast<size_t>(strata::rank())];
    // The shards tile [0, count) in rank order, on cache lines (but for the end).
    size_t next = 0;
    for (const auto& s : shards) {
      EXPECT_EQ(s.offset, next);
      if (s.count > 0 && s.offset + s.count != count) {
        EXPECT_EQ((s.offset + s.count) * elem % 64, 0u);
      }
      next = s.offset + s.count;
    }
    EXPECT_EQ(next, count);
    // 3 elements in: the data need not start on the buffer's cache lines.
    void* data = static_cast<uint8_t*>(in->data()) + 3 * elem;

    // out == in, blocking and asynchronous.
    for (bool async : {false, true}) {
      SCOPED_TRACE(async ? "out == in, async" : "out == in");
      fillInput(dtype, data, count);
      if (async) {
        auto work = world.reduceScatterSharedAsync(data, data, count, dtype, op);
        work->wait();
        EXPECT_TRUE(work->isCompleted());
      } else {
        world.reduceScatterShared(data, data, count, dtype, op);
      }
      if (direct) {
        EXPECT_EQ(wrongIn(dtype, data, want, mine.offset, mine.offset + mine.count), 0u);
        EXPECT_EQ(notInput(dtype, data, 0, mine.offset), 0u) << "written before my shard";
        EXPECT_EQ(notInput(dtype, data, mine.offset + mine.count, count), 0u) << "written after my shard";
        // Once any rank returned, every rank's shard is in its own part.
        for (int p = 0; p < strata::size(); ++p) {
          const void* theirs = static_cast<uint8_t*>(in->part(p)) + 3 * elem;
          const auto& s = shards[static_cast<size_t>(p)];
          EXPECT_EQ(wrongIn(dtype, theirs, want, s.offset, s.offset + s.count), 0u) << "rank " << p << "'s shard";
        }
      } else {
        EXPECT_EQ(wrongIn(dtype, data, want, 0, count), 0u) << "fallback: all of out";
      }
      MPI_Barrier(MPI_COMM_WORLD);  // the peers are done reading my part before it is rewritten
    }

    // out == part(0) of another buffer, which every rank reads whole afterwards.
    {
      SCOPED_TRACE("out == part(0)");
      fillInput(dtype, data, count);
      void* shared = static_cast<uint8_t*>(out->part(0)) + 3 * elem;
      world.reduceScatterShared(data, shared, count, dtype, op);
      EXPECT_EQ(wrongIn(dtype, shared, want, 0, count), 0u);
      if (direct) {
        EXPECT_EQ(notInput(dtype, data, 0, count), 0u) << "in was written";
      }
      MPI_Barrier(MPI_COMM_WORLD);
    }

    // Private memory: an AllReduce into all of out.
    {
      SCOPED_TRACE("private memory");
      std::vector<uint8_t> privateIn(count * elem), privateOut(count * elem);
      fillInput(dtype, privateIn.data(), count);
      world.reduceScatterShared(privateIn.data(), privateOut.data(), count, dtype, op);
      EXPECT_EQ(wrongIn(dtype, privateOut.data(), want, 0, count), 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ReduceScatterSharedMpi,
                         ::testing::Combine(::testing::Values(DType::kFloat32, DType::kFloat64),
                                            ::testing::Values(ReduceOp::kSum, ReduceOp::kAvg)),
                         [](const auto& info) {
                           return std::string(strata::dtypeName(std::get<0>(info.param))) + "_" +
                                  strata::reduceOpName(std::get<1>(info.param));
                         });

// Random floats (inexact sums): part(0) holds the same bits on every rank; zero-copy they are
// the bits of x_0 + x_1 + ... + x_{n-1} left to right (divided by n for the average).
TEST(ReduceScatterSharedMpiBits, RandomFloatsEqualAcrossRanksAndNaiveSum) {
  const int rank = strata::rank();
  const size_t count = 300007;
  auto in = strata::world().allocateShared(count * sizeof(float));
  auto out = strata::world().allocateShared(count * sizeof(float));
  const bool direct = zeroCopy(*in);
  std::vector<float> all;
  const std::vector<float> input = strata::testing::randomFloatsOfEveryRank(count, 4099, rank, all);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    SCOPED_TRACE(strata::reduceOpName(op));
    std::memcpy(in->data(), input.data(), count * sizeof(float));
    float* result = static_cast<float*>(out->part(0));
    strata::world().reduceScatterShared(in->data(), result, count, DType::kFloat32, op);
    std::vector<float> rank0(result, result + count);
    MPI_Bcast(rank0.data(), static_cast<int>(count), MPI_FLOAT, 0, MPI_COMM_WORLD);
    EXPECT_EQ(std::memcmp(rank0.data(), result, count * sizeof(float)), 0) << "rank " << rank << " differs from rank 0";
    if (direct) {
      EXPECT_EQ(strata::testing::differFromLeftToRight(all, count, op, result), 0u)
          << "elements differing from the left-to-right sum, rank " << rank;
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

// Rank 1 passes another offset in the buffer: MismatchError on every rank. A fresh group of
// all ranks, so the failure does not poison the world group the other tests use.
TEST(ReduceScatterSharedMpiMisuse, AnotherOffsetFailsEveryRank) {
  if (strata::size() < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<int> all(static_cast<size_t>(strata::size()));
  for (int r = 0; r < strata::size(); ++r) all[static_cast<size_t>(r)] = r;
  std::shared_ptr<strata::Group> group = strata::newGroup(all);
  {
    auto buffer = group->allocateShared(1 << 16);
    const bool direct = zeroCopy(*buffer);
    float* data = static_cast<float*>(buffer->data()) + (strata::rank() == 1 ? 16 : 0);
    int mismatch = 0;
    std::string error;
    try {
      group->reduceScatterShared(data, data, 1024, DType::kFloat32, ReduceOp::kSum);
    } catch (const strata::MismatchError& e) {
      mismatch = 1;
      error = e.what();
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_TRUE(allRanks(mismatch == 1)) << "some rank did not throw strata::MismatchError; here: " << error;
    // The shared-memory check names the calls; the TCP tag check says the messages differ.
    EXPECT_NE(error.find(direct ? "reduce_scatter_shared" : "mismatch"), std::string::npos) << error;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  group.reset();
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
