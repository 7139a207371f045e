// Own input pieces (Communicator::allReduce in place, reduceScatterShared; Group::InputPiece):
// part of each rank's input lives outside the buffer, where the buffer holds garbage (NaN
// bytes). Against the naive reference, for every algorithm: the result is exact, so every
// piece was read (in place or after a copy) and no garbage was. On the zero-copy
// reduce-scatter, the garbage inside the rank's own shard is still there afterwards: those
// elements were read from the pieces, not copied in.
#include <c10/util/StringUtil.h>
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/reference.h"
#include "collectives/shard_plan.h"
#include "testing/rank_harness.h"

namespace strata::testing {
namespace {

using collectives::InputPiece;
using collectives::Range;
using collectives::sharedShardOf;

constexpr uint8_t kGarbage = 0xff;  // NaN in every float type: any read of it shows

// Pieces of different sizes that together cover most of [0, count): one straddles the
// middle (where shards meet at 2 ranks), one the end; the gaps stay in the buffer.
std::vector<Range> pieceRanges(size_t count) {
  if (count < 8) return {Range{0, count}};
  return {Range{1, count / 3}, Range{count / 2 - count / 7, count / 4}, Range{count - count / 5, count / 5}};
}

// `data` (count elements) holds garbage where the pieces are; the pieces hold `input`.
std::vector<InputPiece> scatterIntoPieces(const std::vector<uint8_t>& input, uint8_t* data, size_t count, size_t elem,
                                          std::vector<std::vector<uint8_t>>& storage) {
  std::memcpy(data, input.data(), count * elem);
  std::vector<InputPiece> pieces;
  storage.clear();
  for (const Range& r : pieceRanges(count))
    storage.emplace_back(input.begin() + r.offset * elem, input.begin() + r.end() * elem);
  const auto ranges = pieceRanges(count);
  for (size_t i = 0; i < ranges.size(); ++i) {
    std::memset(data + ranges[i].offset * elem, kGarbage, ranges[i].count * elem);
    pieces.push_back(InputPiece{ranges[i].offset, ranges[i].count, storage[i].data()});
  }
  return pieces;
}

struct Layout {
  TransportKind kind;
  int worldSize;
  int numHosts;
  std::string algo;
};

void PrintTo(const Layout& l, std::ostream* os) {
  *os << transportKindName(l.kind) << " n=" << l.worldSize << " hosts=" << l.numHosts << " " << l.algo;
}

HarnessOptions harnessFor(const Layout& layout) {
  HarnessOptions opts;
  opts.kind = layout.kind;
  opts.numHosts = layout.numHosts;
  opts.allreduceAlgo = layout.algo;
  opts.connectTcp = layout.kind != TransportKind::kShm;
  return opts;
}

class OwnPieces : public ::testing::TestWithParam<Layout> {};

TEST_P(OwnPieces, AllReduceInPlaceReadsEveryPieceAndNoGarbage) {
  const Layout layout = GetParam();
  const HarnessOptions opts = harnessFor(layout);
  constexpr size_t kMaxCount = (1 << 16) + 3;
  runRanks(layout.worldSize, opts, [&](collectives::Communicator& comm) {
    auto buffer = comm.allocateShared(kMaxCount * 8);
    std::vector<std::vector<uint8_t>> storage;
    for (size_t count : {size_t{5}, size_t{1001}, kMaxCount}) {
      for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
          SCOPED_TRACE(c10::str(dtypeName(dtype), " ", reduceOpName(op), " count ", count, " rank ", comm.rank()));
          const size_t elem = dtypeBytes(dtype);
          const std::vector<uint8_t> input = makeInput(comm.rank(), count, dtype, op);
          uint8_t* data = buffer->mine();
          const auto pieces = scatterIntoPieces(input, data, count, elem, storage);
          comm.allReduce(data, data, count, dtype, op, {}, pieces);
          ASSERT_EQ(firstMismatch(std::vector<uint8_t>(data, data + count * elem),
                                  referenceAllReduce(comm.size(), count, dtype, op), dtype),
                    -1)
              << "algorithm " << collectives::algoName(comm.lastAllReduceAlgo());
          if (layout.algo != "auto") {
            ASSERT_EQ(std::string(collectives::algoName(comm.lastAllReduceAlgo())), layout.algo);
          }
          comm.barrier();  // the peers are done with my part before I write it again
        }
      }
    }
  });
}

TEST_P(OwnPieces, ReduceScatterSharedReadsTheOwnShardInPlace) {
  const Layout layout = GetParam();
  const HarnessOptions opts = harnessFor(layout);
  constexpr size_t kCount = 4099;
  runRanks(layout.worldSize, opts, [&](collectives::Communicator& comm) {
    auto in = comm.allocateShared(kCount * 8);
    auto out = comm.allocateShared(kCount * 8);
    const bool direct = comm.size() > 1 && comm.topology().numHosts == 1 && in->peerMapped();
    std::vector<std::vector<uint8_t>> storage;
    for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
      SCOPED_TRACE(c10::str(dtypeName(dtype), " rank ", comm.rank()));
      const size_t elem = dtypeBytes(dtype);
      const std::vector<uint8_t> input = makeInput(comm.rank(), kCount, dtype, ReduceOp::kAvg);
      uint8_t* data = in->mine();
      const auto pieces = scatterIntoPieces(input, data, kCount, elem, storage);
      uint8_t* shared = out->part(0);
      comm.reduceScatterShared(data, shared, kCount, dtype, ReduceOp::kAvg, {}, pieces);
      ASSERT_EQ(firstMismatch(std::vector<uint8_t>(shared, shared + kCount * elem),
                              referenceAllReduce(comm.size(), kCount, dtype, ReduceOp::kAvg), dtype),
                -1);
      if (direct) {
        // Inside my shard the pieces' places in my buffer still hold garbage (read in
        // place); outside it they hold my input (copied for the peers).
        const Range mine = sharedShardOf(kCount, comm.size(), comm.rank(), dtype);
        size_t inPlace = 0;
        for (size_t i = 0; i < kCount; ++i) {
          bool inPiece = false;
          for (const InputPiece& p : pieces) inPiece = inPiece || (i >= p.offset && i < p.offset + p.count);
          const bool garbage = data[i * elem] == kGarbage && data[i * elem + elem - 1] == kGarbage;
          const bool expectGarbage = inPiece && i >= mine.offset && i < mine.end();
          ASSERT_EQ(garbage, expectGarbage) << "element " << i;
          if (!expectGarbage) {
            ASSERT_EQ(std::memcmp(data + i * elem, input.data() + i * elem, elem), 0) << "element " << i;
          }
          inPlace += expectGarbage ? 1 : 0;
        }
        EXPECT_GT(inPlace, 0u);
      }
      comm.barrier();  // everyone has read part(0) and my part before the next round
    }
  });
}

std::string layoutName(const ::testing::TestParamInfo<Layout>& info) {
  std::string algo = info.param.algo;
  return std::string(transportKindName(info.param.kind)) + "_n" + std::to_string(info.param.worldSize) + "_" + algo;
}

// The zero-copy algorithms (read in place) and the staged ones (pieces copied in first).
INSTANTIATE_TEST_SUITE_P(Algorithms, OwnPieces,
                         ::testing::Values(Layout{TransportKind::kShm, 1, 1, "auto"},
                                           Layout{TransportKind::kShm, 2, 1, "shm_direct"},
                                           Layout{TransportKind::kShm, 3, 1, "shm_direct"},
                                           Layout{TransportKind::kShm, 2, 1, "shm_oneshot"},
                                           Layout{TransportKind::kShm, 3, 1, "shm_chunked"},
                                           Layout{TransportKind::kHierarchical, 4, 2, "hierarchical_direct"},
                                           Layout{TransportKind::kHierarchical, 4, 2, "hierarchical"},
                                           Layout{TransportKind::kTcp, 3, 1, "tcp_ring"}),
                         layoutName);

}  // namespace
}  // namespace strata::testing
