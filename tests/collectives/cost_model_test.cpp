#include <gtest/gtest.h>

#include "collectives/communicator.h"
#include "collectives/cost_model.h"
#include "collectives/shm_domain.h"

namespace strata::collectives {
namespace {

TopologySummary oneHost(int n) {
  TopologySummary t;
  t.worldSize = n;
  t.maxLocalSize = n;
  return t;
}

TEST(CostModel, OneHostUsesSharedMemory) {
  const TopologySummary t = oneHost(2);
  EXPECT_EQ(chooseAllReduce(t, 4096, "auto").algo, AllReduceAlgo::kShmOneShot);
  EXPECT_EQ(chooseAllReduce(t, 256 << 20, "auto").algo, AllReduceAlgo::kShmChunked);
}

TEST(CostModel, LargeMessagesPreferTheChunkedAlgorithm) {
  const TopologySummary t = oneHost(4);
  EXPECT_LT(estimateUs(AllReduceAlgo::kShmChunked, t, 1 << 20), estimateUs(AllReduceAlgo::kShmOneShot, t, 1 << 20));
}

TEST(CostModel, TcpOnlyWhenShmIsOff) {
  TopologySummary t = oneHost(4);
  t.shmEnabled = false;
  EXPECT_EQ(chooseAllReduce(t, 64, "auto").algo, AllReduceAlgo::kTcpDirect);
  EXPECT_EQ(chooseAllReduce(t, 64 << 20, "auto").algo, AllReduceAlgo::kTcpRing);
}

TEST(CostModel, SeveralHostsWithSeveralRanksEachAreHierarchical) {
  TopologySummary t;
  t.worldSize = 8;
  t.numHosts = 2;
  t.maxLocalSize = 4;
  EXPECT_EQ(chooseAllReduce(t, 64 << 20, "auto").algo, AllReduceAlgo::kHierarchical);
  t.uniformLocalSize = false;
  EXPECT_NE(chooseAllReduce(t, 64 << 20, "auto").algo, AllReduceAlgo::kHierarchical);
}

TEST(CostModel, ForcedAlgorithms) {
  const TopologySummary t = oneHost(2);
  EXPECT_EQ(chooseAllReduce(t, 4096, "tcp_ring").algo, AllReduceAlgo::kTcpRing);
  EXPECT_NE(chooseAllReduce(t, 4096, "hierarchical").error.find("cannot run here"), std::string::npos);
  EXPECT_NE(chooseAllReduce(t, 4096, "ringg").error.find("unknown allreduce algorithm \"ringg\""),
            std::string::npos);
  EXPECT_NE(chooseAllReduce(t, 64 << 20, "shm_oneshot").error.find("cannot run here"), std::string::npos);
  for (const auto& name : algoNames()) {
    if (name != "auto") {
      EXPECT_EQ(algoName(*parseAlgo(name)), name);
    }
  }
}

TEST(CostModel, SharedBuffersTakeTheZeroCopyPath) {
  const TopologySummary t = oneHost(2);
  const auto shared = Placement::kSharedInPlace;
  for (size_t bytes : {size_t{8}, size_t{4} << 10, size_t{64} << 10, size_t{1} << 20, size_t{256} << 20})
    EXPECT_EQ(chooseAllReduce(t, bytes, "auto", shared).algo, AllReduceAlgo::kShmDirect) << bytes;
  // Never for ordinary memory, where it cannot run.
  EXPECT_NE(chooseAllReduce(t, 256 << 20, "auto").algo, AllReduceAlgo::kShmDirect);
  EXPECT_NE(chooseAllReduce(t, 4096, "shm_direct").error.find("cannot run here"), std::string::npos);
  EXPECT_EQ(chooseAllReduce(t, 4096, "shm_direct", shared).algo, AllReduceAlgo::kShmDirect);
}

TEST(CostModel, SharedBuffersOnSeveralHostsAreHierarchicalDirect) {
  TopologySummary t;
  t.worldSize = 8;
  t.numHosts = 2;
  t.maxLocalSize = 4;
  EXPECT_EQ(chooseAllReduce(t, 64 << 20, "auto", Placement::kSharedInPlace).algo,
            AllReduceAlgo::kHierarchicalDirect);
  EXPECT_EQ(chooseAllReduce(t, 64 << 20, "auto").algo, AllReduceAlgo::kHierarchical);
  t.shmEnabled = false;  // STRATA_TRANSPORT=tcp: nothing is peer-mapped
  EXPECT_EQ(chooseAllReduce(t, 64 << 20, "auto", Placement::kSharedInPlace).algo, AllReduceAlgo::kTcpRing);
}

TEST(CostModel, DefaultChunkFollowsCoresAndNeverExceedsTheSlot) {
  EXPECT_EQ(defaultChunkBytes(1 << 20, 2, 2), size_t{512} << 10);
  EXPECT_EQ(defaultChunkBytes(1 << 20, 4, 2), size_t{256} << 10);  // oversubscribed
  EXPECT_EQ(defaultChunkBytes(64 << 10, 2, 2), size_t{64} << 10);  // capped by the slot
  EXPECT_EQ(defaultChunkBytes(1 << 20, 1, 1), size_t{512} << 10);
}

TEST(CostModel, ChunkCountEntersTheChunkedEstimate) {
  TopologySummary big = oneHost(2), small = oneHost(2);
  big.chunkBytes = 1 << 20;
  small.chunkBytes = 4 << 10;  // 4x the synchronisations per byte of a 16 KiB chunk
  EXPECT_GT(estimateUs(AllReduceAlgo::kShmChunked, small, 64 << 20),
            estimateUs(AllReduceAlgo::kShmChunked, big, 64 << 20));
}

TEST(CostModel, TcpRingOvertakesDirectExchangeForLargeMessages) {
  TopologySummary t = oneHost(2);
  t.shmEnabled = false;
  EXPECT_EQ(chooseAllReduce(t, 64 << 10, "auto").algo, AllReduceAlgo::kTcpDirect);
  // bench/RESULTS.md: tcp_ring 1.49x Gloo vs tcp_direct 1.30x at 256 MiB on 2 ranks.
  EXPECT_EQ(chooseAllReduce(t, 256 << 20, "auto").algo, AllReduceAlgo::kTcpRing);
}

TEST(ShmDomainSpins, YieldEarlyOnlyWhenRanksOutnumberTheDomainsCores) {
  EXPECT_GT(spinsForCores(2, 2), spinsForCores(4, 2));
  EXPECT_EQ(spinsForCores(2, 64), spinsForCores(2, 2));
  EXPECT_EQ(spinsForCores(3, 2), spinsForCores(8, 2));
}

TEST(Topology, HostsNumberedByFirstAppearance) {
  const GroupTopology t = buildTopology(3, {7, 7, 2, 2, 9});
  EXPECT_EQ(t.numHosts, 3);
  EXPECT_EQ(t.hostOf, (std::vector<int>{0, 0, 1, 1, 2}));
  EXPECT_EQ(t.localRanks, (std::vector<int>{2, 3}));
  EXPECT_EQ(t.localIndex, 1);
  EXPECT_EQ(t.crossHostRanks, (std::vector<int>{1, 3, -1}));
  EXPECT_FALSE(t.uniformLocalSize);
  EXPECT_EQ(t.maxLocalSize, 2);
}

TEST(Topology, UniformHosts) {
  const GroupTopology t = buildTopology(0, {0, 0, 1, 1});
  EXPECT_TRUE(t.uniformLocalSize);
  EXPECT_EQ(t.crossHostRanks, (std::vector<int>{0, 2}));
}

}  // namespace
}  // namespace strata::collectives
