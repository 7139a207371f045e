#include <gtest/gtest.h>

#include <set>

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

}  // namespace
}  // namespace strata::collectives
