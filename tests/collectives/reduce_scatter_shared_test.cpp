// Communicator::reduceScatterShared (Group::reduceScatterShared) on ranks as threads, against
// the naive reference: on one host the zero-copy reduction writes exactly this rank's shard
// of `out` (out == in: the rest of `in` keeps the input; out == part(0) of another buffer:
// every rank reads the whole result there once any call returned); on pretend hosts, over
// TCP and on ordinary memory it is an AllReduce into all of `out`. And the misuse path: a
// rank passing another offset in the buffer, or ordinary memory, fails every rank with
// MismatchError.
#include <c10/util/StringUtil.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/reference.h"
#include "collectives/shard_plan.h"
#include "core/errors.h"
#include "testing/rank_harness.h"

namespace strata::testing {
namespace {

using collectives::Range;
using collectives::sharedShardOf;

std::vector<uint8_t> bytesAt(const uint8_t* data, Range r, size_t elem) {
  return std::vector<uint8_t>(data + r.offset * elem, data + r.end() * elem);
}

std::vector<uint8_t> slice(const std::vector<uint8_t>& v, Range r, size_t elem) {
  return bytesAt(v.data(), r, elem);
}

// Whether the call takes the zero-copy path: one host, `in` mapped by the peers.
bool zeroCopy(collectives::Communicator& comm, const collectives::SharedRegion& in) {
  return comm.size() > 1 && comm.topology().numHosts == 1 && in.peerMapped();
}

class ReduceScatterShared : public ::testing::TestWithParam<std::tuple<TransportKind, int>> {};

TEST_P(ReduceScatterShared, OutIsInOrPartZeroOfAnotherBuffer) {
  const auto [kind, worldSize] = GetParam();
  HarnessOptions opts;
  opts.kind = kind;
  opts.connectTcp = kind != TransportKind::kShm;
  constexpr size_t kMaxCount = 4099;
  runRanks(worldSize, opts, [&, kind = kind](collectives::Communicator& comm) {
    auto in = comm.allocateShared((kMaxCount + 8) * 8);
    auto out = comm.allocateShared((kMaxCount + 8) * 8);
    const bool direct = zeroCopy(comm, *in);
    ASSERT_EQ(direct, kind == TransportKind::kShm && comm.size() > 1);
    int variant = 0;
    for (size_t count : {size_t{1}, size_t{17}, kMaxCount}) {
      for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kBFloat16}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
          SCOPED_TRACE(c10::str(dtypeName(dtype), " ", reduceOpName(op), " count ", count, " rank ", comm.rank()));
          const size_t elem = dtypeBytes(dtype);
          const size_t offset = (variant++ % 2) * 3 * elem;  // shards need not start on the buffer's lines
          const std::vector<uint8_t> input = makeInput(comm.rank(), count, dtype, op);
          const std::vector<uint8_t> expected = referenceAllReduce(comm.size(), count, dtype, op);
          const Range mine = sharedShardOf(count, comm.size(), comm.rank(), dtype);
          uint8_t* data = in->mine() + offset;

          // out == in.
          std::memcpy(data, input.data(), input.size());
          comm.reduceScatterShared(data, data, count, dtype, op);
          if (direct) {
            // Every rank's shard is in its own part, and nothing else of mine was written.
            for (int p = 0; p < comm.size(); ++p) {
              const Range theirs = sharedShardOf(count, comm.size(), p, dtype);
              ASSERT_EQ(bytesAt(in->part(p) + offset, theirs, elem), slice(expected, theirs, elem)) << "part " << p;
            }
            ASSERT_EQ(bytesAt(data, Range{0, mine.offset}, elem), slice(input, Range{0, mine.offset}, elem));
            const Range after{mine.end(), count - mine.end()};
            ASSERT_EQ(bytesAt(data, after, elem), slice(input, after, elem));
          } else {
            ASSERT_EQ(firstMismatch(std::vector<uint8_t>(data, data + input.size()), expected, dtype), -1);
          }
          comm.barrier();  // the peers are done reading my part before I write it again

          // out == part(0) of another buffer, filled by all local ranks together.
          std::memcpy(data, input.data(), input.size());
          uint8_t* shared = out->part(0) + offset;
          comm.reduceScatterShared(data, shared, count, dtype, op);
          ASSERT_EQ(firstMismatch(std::vector<uint8_t>(shared, shared + input.size()), expected, dtype), -1);
          if (direct) {
            ASSERT_EQ(std::vector<uint8_t>(data, data + input.size()), input);
          }
          comm.barrier();  // everyone has read part(0) before the next call writes it
        }
      }
    }
  });
}

std::string paramName(const ::testing::TestParamInfo<ReduceScatterShared::ParamType>& info) {
  return std::string(transportKindName(std::get<0>(info.param))) + "_n" + std::to_string(std::get<1>(info.param));
}

// One host (zero-copy, n not a power of two too), two pretend hosts of 2 and 2 or 2 and 3
// ranks (local peers share part(0), across hosts an AllReduce), TCP only (private buffers).
INSTANTIATE_TEST_SUITE_P(
    Layouts, ReduceScatterShared,
    ::testing::Values(std::make_tuple(TransportKind::kShm, 1), std::make_tuple(TransportKind::kShm, 2),
                      std::make_tuple(TransportKind::kShm, 3), std::make_tuple(TransportKind::kShm, 4),
                      std::make_tuple(TransportKind::kHierarchical, 4),
                      std::make_tuple(TransportKind::kHierarchical, 5), std::make_tuple(TransportKind::kTcp, 3)),
    paramName);

// `in` in ordinary memory: an AllReduce, all of `out` holds the result.
TEST(ReduceScatterShared, OrdinaryMemoryIsAnAllReduce) {
  HarnessOptions opts;
  opts.connectTcp = false;
  runRanks(3, opts, [](collectives::Communicator& comm) {
    const size_t count = 1001;
    const std::vector<uint8_t> input = makeInput(comm.rank(), count, DType::kFloat32, ReduceOp::kAvg);
    std::vector<uint8_t> result(input.size(), 0xff);
    comm.reduceScatterShared(input.data(), result.data(), count, DType::kFloat32, ReduceOp::kAvg);
    EXPECT_EQ(firstMismatch(result, referenceAllReduce(3, count, DType::kFloat32, ReduceOp::kAvg), DType::kFloat32),
              -1);
  });
}

// Rank 2 passes another offset in the buffer, or ordinary memory.
class ReduceScatterSharedMisuse : public ::testing::TestWithParam<std::tuple<TransportKind, std::string>> {};

TEST_P(ReduceScatterSharedMisuse, InconsistentPlacesFailEveryRank) {
  const auto [kind, what] = GetParam();
  HarnessOptions opts;
  opts.kind = kind;
  opts.connectTcp = kind != TransportKind::kShm;
  opts.timeout = std::chrono::seconds(20);
  std::atomic<int> errors{0};
  runRanks(4, opts, [&, kind = kind, what = what](collectives::Communicator& comm) {
    auto buffer = comm.allocateShared(1 << 16);
    std::vector<float> plain(1024, 1.f);
    float* data = reinterpret_cast<float*>(buffer->mine());
    if (comm.rank() == 2) data = what == "offset" ? data + 16 : plain.data();
    try {
      comm.reduceScatterShared(data, data, 1024, DType::kFloat32, ReduceOp::kSum);
      ADD_FAILURE() << "rank " << comm.rank() << " reduced inconsistent places (" << what << ")";
    } catch (const MismatchError& e) {
      // On one host the shared-memory check names the calls; between hosts the TCP tag check
      // only says that the messages differ.
      const std::string what = e.what();
      EXPECT_NE(what.find(kind == TransportKind::kShm ? "reduce_scatter_shared" : "mismatch"), std::string::npos)
          << what;
      ++errors;
    }
  });
  EXPECT_EQ(errors.load(), 4);
}

INSTANTIATE_TEST_SUITE_P(Layouts, ReduceScatterSharedMisuse,
                         ::testing::Combine(::testing::Values(TransportKind::kShm, TransportKind::kHierarchical),
                                            ::testing::Values("offset", "ordinary_memory")),
                         [](const auto& info) {
                           return std::string(transportKindName(std::get<0>(info.param))) + "_" +
                                  std::get<1>(info.param);
                         });

}  // namespace
}  // namespace strata::testing
