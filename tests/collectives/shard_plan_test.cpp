#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>

#include "collectives/shard_plan.h"

namespace strata::collectives {
namespace {

TEST(ShardPlan, ShardsCoverExactlyOnceAndAreAligned) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{4096}, size_t{(1 << 20) + 3}}) {
    for (int parts : {1, 2, 3, 4, 7, 8}) {
      for (size_t align : {size_t{1}, size_t{16}}) {
        const auto shards = planShards(count, parts, align);
        ASSERT_EQ(shards.size(), static_cast<size_t>(parts));
        size_t next = 0;
        for (int i = 0; i < parts; ++i) {
          EXPECT_EQ(shards[i].offset, next) << "count=" << count << " parts=" << parts << " i=" << i;
          if (shards[i].count > 0 && shards[i].end() != count) {
            EXPECT_EQ(shards[i].end() % align, 0u) << "unaligned boundary";
          }
          next = shards[i].end();
        }
        EXPECT_EQ(next, count);
      }
    }
  }
}

TEST(ShardPlan, ShardsAreBalancedToOneUnit) {
  const auto shards = planShards(1000, 3, 16);
  // 63 units of 16 (last partial): 21 each.
  EXPECT_EQ(shards[0].count, 336u);
  EXPECT_EQ(shards[1].count, 336u);
  EXPECT_EQ(shards[2].count, 328u);
}

// Group::sharedShard / reduceScatterShared: by group rank, cache-line aligned for the dtype.
TEST(SharedShard, TilesTheCountOnCacheLinesForEveryDType) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kUInt8}) {
    const size_t elem = dtypeBytes(dtype);
    for (size_t count : {size_t{0}, size_t{1}, size_t{17}, size_t{1000003}}) {
      for (int n : {1, 2, 3, 4, 7}) {
        size_t next = 0, largest = 0, smallest = count;
        for (int r = 0; r < n; ++r) {
          const Range s = sharedShardOf(count, n, r, dtype);
          ASSERT_EQ(s.offset, next) << dtypeName(dtype) << " count=" << count << " n=" << n << " r=" << r;
          if (s.count > 0) {
            EXPECT_EQ(s.offset * elem % kShardAlignBytes, 0u) << "starts inside a cache line";
          }
          if (s.end() != count) {
            EXPECT_EQ(s.end() * elem % kShardAlignBytes, 0u) << "ends inside a cache line";
          }
          largest = std::max(largest, s.count);
          smallest = std::min(smallest, s.count);
          next = s.end();
        }
        EXPECT_EQ(next, count);
        // Balanced: one cache line more at most, the last shard up to a line shorter (the
        // count's partial line), once every rank gets a line.
        if (count * elem >= static_cast<size_t>(n) * kShardAlignBytes) {
          EXPECT_LT((largest - smallest) * elem, 2 * kShardAlignBytes) << dtypeName(dtype) << " count=" << count;
        }
      }
    }
  }
}

TEST(SharedShard, KnownSplits) {
  // 17 float32 = one full line and one element: rank 0 the line, rank 1 the rest, 2 and 3 none.
  EXPECT_EQ(sharedShardOf(17, 4, 0, DType::kFloat32).count, 16u);
  EXPECT_EQ(sharedShardOf(17, 4, 1, DType::kFloat32).offset, 16u);
  EXPECT_EQ(sharedShardOf(17, 4, 1, DType::kFloat32).count, 1u);
  EXPECT_EQ(sharedShardOf(17, 4, 3, DType::kFloat32).count, 0u);
  // 1000003 float64: 125001 lines of 8, 31251 to rank 0 and 31250 to the others (the last one
  // short by the 5 missing elements).
  EXPECT_EQ(sharedShardOf(1000003, 4, 0, DType::kFloat64).count, 250008u);
  EXPECT_EQ(sharedShardOf(1000003, 4, 1, DType::kFloat64).offset, 250008u);
  EXPECT_EQ(sharedShardOf(1000003, 4, 3, DType::kFloat64).offset, 750008u);
  EXPECT_EQ(sharedShardOf(1000003, 4, 3, DType::kFloat64).count, 249995u);
  // One rank owns everything.
  EXPECT_EQ(sharedShardOf(1000003, 1, 0, DType::kFloat32).count, 1000003u);
}

TEST(ShardPlan, ChunksCoverTheBuffer) {
  EXPECT_EQ(numChunks(0, 10), 0u);
  EXPECT_EQ(numChunks(10, 10), 1u);
  EXPECT_EQ(numChunks(11, 10), 2u);
  const Range last = chunkOf(25, 10, 2);
  EXPECT_EQ(last.offset, 20u);
  EXPECT_EQ(last.count, 5u);
}

TEST(RingPlan, EveryShardReducedOnceAndOwnedByOneRank) {
  for (int n : {1, 2, 3, 4, 7, 8}) {
    std::set<int> owned;
    for (int r = 0; r < n; ++r) {
      owned.insert(ringOwnedShard(r, n));
      const auto rs = planRingReduceScatter(r, n);
      ASSERT_EQ(rs.size(), static_cast<size_t>(n - 1));
      const auto left = planRingReduceScatter((r + n - 1) % n, n);
      for (size_t s = 0; s < rs.size(); ++s) {
        // What I receive at step s is what my left neighbour sends at step s.
        EXPECT_EQ(rs[s].recvShard, left[s].sendShard) << "n=" << n << " r=" << r << " s=" << s;
        // What I send at step s > 0 is what I received (and reduced) at step s-1.
        if (s > 0) {
          EXPECT_EQ(rs[s].sendShard, rs[s - 1].recvShard);
        }
      }
      if (n > 1) {
        EXPECT_EQ(rs.back().recvShard, ringOwnedShard(r, n));
      }
      const auto ag = planRingAllGather(r, n);
      const auto agLeft = planRingAllGather((r + n - 1) % n, n);
      for (size_t s = 0; s < ag.size(); ++s) EXPECT_EQ(ag[s].recvShard, agLeft[s].sendShard);
      if (n > 1) {
        EXPECT_EQ(ag.front().sendShard, ringOwnedShard(r, n));
      }
    }
    EXPECT_EQ(owned.size(), static_cast<size_t>(n));
  }
}


// Group::reduceScatterShared / allreduce with own pieces: where each element of the shard is read.
TEST(SourceRuns, TileTheShardWithPiecesAndGapsInOrder) {
  const float a[8] = {}, b[8] = {};
  const Range shard{16, 32};
  // Given out of order; b ends at the shard's end, a leaves gaps on both sides.
  const auto runs = planSourceRuns(shard, {{40, 8, b}, {20, 4, a}, {30, 0, nullptr}}, sizeof(float));
  ASSERT_EQ(runs.size(), 4u);
  const size_t offsets[] = {16, 20, 24, 40}, counts[] = {4, 4, 16, 8};
  const void* sources[] = {nullptr, a, nullptr, b};
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].range.offset, offsets[i]) << "run " << i;
    EXPECT_EQ(runs[i].range.count, counts[i]) << "run " << i;
    EXPECT_EQ(runs[i].data, sources[i]) << "run " << i;
  }
  EXPECT_TRUE(piecesOutside(shard, {{40, 8, b}, {20, 4, a}}, sizeof(float)).empty());
}

TEST(SourceRuns, WithoutPiecesTheShardIsOneRunFromTheBufferAndAnEmptyShardHasNone) {
  auto runs = planSourceRuns(Range{64, 10}, {}, 8);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].range.offset, 64u);
  EXPECT_EQ(runs[0].range.count, 10u);
  EXPECT_EQ(runs[0].data, nullptr);
  EXPECT_TRUE(planSourceRuns(Range{5, 0}, {}, 8).empty());
  const double whole[10] = {};
  runs = planSourceRuns(Range{64, 10}, {{64, 10, whole}}, sizeof(double));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].data, whole);
}

// A parameter's gradient straddles the shard's edges: the middle is read in place, the two
// ends are what the peers read, copied into the buffer.
TEST(SourceRuns, PiecesAreClippedToTheShardAndTheirOutsideIsWhatGetsCopied) {
  double grad[100] = {};
  const Range shard{32, 48};                                            // [32, 80)
  const std::vector<InputPiece> pieces{{10, 100, grad}, {0, 5, grad}};  // [10, 110) straddles, [0, 5) outside
  const auto runs = planSourceRuns(shard, pieces, sizeof(double));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].range.offset, 32u);
  EXPECT_EQ(runs[0].range.count, 48u);
  EXPECT_EQ(runs[0].data, grad + 22);  // element 32 of the buffer is element 22 of the piece
  const auto outside = piecesOutside(shard, pieces, sizeof(double));
  ASSERT_EQ(outside.size(), 3u);
  EXPECT_EQ(outside[0].offset, 10u);
  EXPECT_EQ(outside[0].count, 22u);
  EXPECT_EQ(outside[0].data, grad);
  EXPECT_EQ(outside[1].offset, 80u);
  EXPECT_EQ(outside[1].count, 30u);
  EXPECT_EQ(outside[1].data, grad + 70);
  EXPECT_EQ(outside[2].offset, 0u);
  EXPECT_EQ(outside[2].count, 5u);
  // Every element of every piece is read exactly once: in place or after the copy.
  size_t covered = 0;
  for (const auto& r : runs) covered += r.data ? r.range.count : 0;
  for (const auto& p : outside) covered += p.count;
  EXPECT_EQ(covered, 105u);
}

TEST(SourceRuns, RejectOverlappingPiecesAndPiecesWithoutData) {
  const float x[4] = {};
  const auto message = [&](std::vector<InputPiece> pieces) {
    try {
      planSourceRuns(Range{16, 16}, std::move(pieces), sizeof(float));
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(
      message({{16, 4, x}, {18, 4, x}}).find("input piece [18, +4) overlaps the piece before it (which ends at 20)"),
      std::string::npos);
  EXPECT_NE(message({{0, 4, x}, {2, 4, x}}).find("overlaps"), std::string::npos);  // outside the shard too
  EXPECT_NE(message({{16, 4, nullptr}}).find("input piece [16, +4) has no data"), std::string::npos);
  EXPECT_EQ(message({{16, 4, x}, {20, 4, x}}), "no error");
}

// Group::allreduceAsync / reduceScatterSharedAsync check the pieces before anything runs.
TEST(SourceRuns, InputPiecesMustLieInsideTheInput) {
  const float x[8] = {};
  EXPECT_NO_THROW(checkInputPieces(16, {{8, 8, x}, {0, 4, x}, {4, 0, nullptr}}));
  const auto message = [&](size_t count, std::vector<InputPiece> pieces) {
    try {
      checkInputPieces(count, std::move(pieces));
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(16, {{12, 8, x}}).find("input piece [12, +8) reaches past the input's 16 elements"),
            std::string::npos);
  EXPECT_NE(message(16, {{SIZE_MAX, 2, x}}).find("reaches past"), std::string::npos);  // no wrap-around
  EXPECT_NE(message(16, {{0, 8, x}, {4, 8, x}}).find("overlaps"), std::string::npos);
  EXPECT_NE(message(16, {{0, 8, nullptr}}).find("has no data"), std::string::npos);
}

}  // namespace
}  // namespace strata::collectives
