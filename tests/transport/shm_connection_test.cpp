// The shared-memory transport (transport/shm/): its pure ring decisions (ring_plan.h: ring
// sizes, yield windows, chunk plans), then its connections between ranks as threads, against
// the TCP connection's contract: ordering and contents (a pattern per message), messages
// larger than the ring, eager sends nobody waits on, tag/size mismatches reported on both
// sides, timeouts, close reasons reaching the peer, a dead peer process, and sends and
// receives posted from different threads at once. The local ranks meet through a store here
// (the collectives' ShmDomain plays that part in a job).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>

#include "bootstrap/store.h"
#include "core/errors.h"
#include "transport/registry.h"
#include "transport/shm/region.h"
#include "transport/shm/ring_plan.h"
#include "transport/shm/transport.h"
#include "transport/transport_testing.h"

namespace strata::transport::shm {
namespace {

using namespace std::chrono_literals;

// ----- pure decisions -----------------------------------------------------------------

TEST(ShmRingPlan, RingBytesFollowTheBudgetAndThePage) {
  EXPECT_EQ(p2pRingBytes(2, 0), kP2pRingMaxBytes);
  EXPECT_EQ(p2pRingBytes(5, 0), kP2pRingMaxBytes);  // 4 peers x the largest ring = the budget
  static_assert(4 * kP2pRingMaxBytes == kP2pRingBudgetBytes, "the case above sits on the boundary");
  EXPECT_EQ(p2pRingBytes(9, 0), kP2pRingBudgetBytes / 8);
  EXPECT_EQ(p2pRingBytes(1000, 0), kP2pRingMinBytes);
  EXPECT_EQ(p2pRingBytes(2, 100000), size_t{98304});  // rounded down to pages
  EXPECT_EQ(p2pRingBytes(2, 10), kP2pRingMinBytes);
}

TEST(ShmRingPlan, WaitsKeepTheCoreOnlyWhenEveryRankHasOne) {
  EXPECT_EQ(p2pYieldUs(2, 2, -1), kP2pYieldUs);
  EXPECT_EQ(p2pYieldUs(1, 8, -1), kP2pYieldUs);
  EXPECT_EQ(p2pYieldUs(3, 2, -1), 0);   // oversubscribed: sleep after the spin
  EXPECT_EQ(p2pYieldUs(3, 2, 700), 700);  // STRATA_P2P_YIELD_US wins
  EXPECT_EQ(p2pYieldUs(2, 2, 0), 0);
}

TEST(ShmRingPlan, RingPiecesWrapAroundTheEnd) {
  auto p = ringPieces(10, 5, 16);
  EXPECT_EQ(p[0].offset, 10u);
  EXPECT_EQ(p[0].length, 5u);
  EXPECT_EQ(p[1].length, 0u);
  p = ringPieces(16 * 3 + 12, 10, 16);
  EXPECT_EQ(p[0].offset, 12u);
  EXPECT_EQ(p[0].length, 4u);
  EXPECT_EQ(p[1].offset, 0u);
  EXPECT_EQ(p[1].length, 6u);
}

TEST(ShmRingPlan, ProducerAndConsumerAreBoundedBySpaceDataAndChunk) {
  EXPECT_EQ(bytesToProduce(100, 0, 0, 64, 16), 16u);
  EXPECT_EQ(bytesToProduce(100, 60, 0, 64, 16), 4u);   // 4 bytes free
  EXPECT_EQ(bytesToProduce(100, 64, 0, 64, 16), 0u);   // full
  EXPECT_EQ(bytesToProduce(3, 10, 10, 64, 16), 3u);    // what is left
  EXPECT_EQ(bytesToConsume(100, 70, 60, 16), 10u);     // what arrived
  EXPECT_EQ(bytesToConsume(5, 70, 60, 16), 5u);
  EXPECT_EQ(bytesToConsume(100, 60, 60, 16), 0u);
}

TEST(ShmRingPlan, ChunkPlanCoversTheMessageInQuarterRings) {
  for (size_t bytes : {size_t{0}, size_t{16}, size_t{1000}, size_t{4096}, size_t{10000}}) {
    const auto chunks = chunkPlan(bytes, 4096);
    EXPECT_EQ(std::accumulate(chunks.begin(), chunks.end(), size_t{0}), bytes);
    EXPECT_EQ(chunks.size(), (bytes + 1023) / 1024) << bytes;
    for (size_t c : chunks) EXPECT_LE(c, 1024u);
  }
}

// ----- the link between ranks as threads ----------------------------------------------

// This host's ranks as the transport needs them, met through a store: rank 0 names the
// segments, syncAll is a store barrier.
class StoreLocalPeers final : public LocalPeers {
 public:
  StoreLocalPeers(bootstrap::Store& store, int rank, int size) : store_(store), rank_(rank), size_(size) {
    if (rank == 0) bootstrap::setString(store, "name", "/strata-test." + std::to_string(getpid()) + "." +
                                                           std::to_string(std::random_device()()));
    name_ = bootstrap::getString(store, "name", 20s);
  }
  int localRank() const override { return rank_; }
  int localSize() const override { return size_; }
  const std::string& name() const override { return name_; }
  void syncAll(const char* what) override {
    bootstrap::storeBarrier(store_, std::string(what) + "/" + std::to_string(++syncs_), size_, 20s);
  }
  void fail(const std::string& reason) override { ADD_FAILURE() << "rank " << rank_ << " failed: " << reason; }

 private:
  bootstrap::Store& store_;
  const int rank_;
  const int size_;
  std::string name_;
  int syncs_ = 0;
};

// Connections by peer rank (null at self) of `n` ranks on threads of this host.
using LinkFn = std::function<void(int rank, std::vector<std::unique_ptr<Connection>>& byPeer)>;

void runLinked(int n, size_t ringBytes, const LinkFn& fn, const std::vector<pid_t>& pids = {}) {
  auto store = bootstrap::makeHashStore();
  testing::runRanks(n, [&](int rank) {
    StoreLocalPeers local(*store, rank, n);
    TransportOptions opts;
    opts.localPeers = &local;
    opts.ringBytes = ringBytes;
    auto transport = builtinRegistry().entry(Kind::kShm).make(opts);
    std::vector<PeerInfo> peers;
    for (int p = 0; p < n; ++p)
      if (p != rank) peers.push_back(PeerInfo{p, "", 0, pids.empty() ? 0 : pids[p]});
    auto conns = transport->connect(*store, PeerInfo{rank, "", 0, pids.empty() ? 0 : pids[rank]}, peers);
    std::vector<std::unique_ptr<Connection>> byPeer(static_cast<size_t>(n));
    for (size_t i = 0; i < peers.size(); ++i) {
      EXPECT_EQ(conns[i]->peer(), peers[i].rank);
      byPeer[peers[i].rank] = std::move(conns[i]);
    }
    fn(rank, byPeer);
  });
}

// Message i from rank `from`: bytes that differ per message, per position and per sender.
std::vector<uint8_t> pattern(int from, int i, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  for (size_t k = 0; k < bytes; ++k) v[k] = static_cast<uint8_t>(k * 31 + static_cast<size_t>(i) * 7 + from);
  return v;
}

constexpr size_t kSmallRing = 64 << 10;

TEST(ShmConnection, MessagesArriveInOrderWithTheirBytesIncludingLargerThanTheRing) {
  const std::vector<size_t> sizes = {0, 1, 17, 4096, kSmallRing - 16, kSmallRing, kSmallRing + 1, 1 << 20, 3 << 20};
  runLinked(2, kSmallRing, [&](int rank, auto& byPeer) {
    Connection& c = *byPeer[1 - rank];
    for (int round = 0; round < 2; ++round) {  // both ways: rank 0 sends first, then rank 1
      const bool sending = rank == round;
      for (size_t i = 0; i < sizes.size(); ++i) {
        const auto expected = pattern(round, static_cast<int>(i), sizes[i]);
        if (sending) {
          c.postSend(expected.data(), expected.size(), 100 + i)->wait(20s);
        } else {
          std::vector<uint8_t> got(sizes[i], 0xEE);
          c.postRecv(got.data(), got.size(), 100 + i)->wait(20s);
          EXPECT_EQ(got, expected) << "message " << i << " of " << sizes[i] << " bytes";
        }
      }
    }
  });
}

// The pipeline posts an eager send and goes on to wait for something else: the link's
// progress thread must move the rest of the message as the receiver makes room.
TEST(ShmConnection, EagerSendLargerThanTheRingProgressesWhileTheSenderWaitsElsewhere) {
  const size_t big = 4 << 20;
  runLinked(2, kSmallRing, [&](int rank, auto& byPeer) {
    Connection& c = *byPeer[1 - rank];
    const auto msg = pattern(0, 1, big);
    const auto reply = pattern(1, 2, 4096);
    if (rank == 0) {
      auto send = c.postSend(msg.data(), msg.size(), 1);
      std::vector<uint8_t> got(reply.size());
      c.postRecv(got.data(), got.size(), 2)->wait(20s);
      EXPECT_EQ(got, reply);
      send->wait(20s);
    } else {
      std::vector<uint8_t> got(big);
      c.postRecv(got.data(), got.size(), 1)->wait(20s);
      EXPECT_EQ(got, msg);
      c.postSend(reply.data(), reply.size(), 2)->wait(20s);
    }
  });
}

using testing::MismatchCase;

class ShmConnectionMismatch : public ::testing::TestWithParam<MismatchCase> {};

TEST_P(ShmConnectionMismatch, BothSidesThrowMismatchErrorNamingTagsAndBytes) {
  const MismatchCase m = GetParam();
  runLinked(2, kSmallRing, [&](int rank, auto& byPeer) {
    Connection& c = *byPeer[1 - rank];
    if (rank == 0) {
      std::vector<uint8_t> data(m.sentBytes, 1);
      try {
        // The eager send may complete; the receiver's close then fails the next op.
        c.postSend(data.data(), data.size(), m.sentTag)->wait(20s);
        uint8_t byte = 0;
        c.postRecv(&byte, 1, 99)->wait(20s);
        ADD_FAILURE() << "the sender never heard of the mismatch";
      } catch (const MismatchError& e) {
        EXPECT_NE(std::string(e.what()).find("expected tag " + std::to_string(m.expectedTag)), std::string::npos)
            << e.what();
      }
    } else {
      std::vector<uint8_t> data(m.expectedBytes);
      try {
        c.postRecv(data.data(), data.size(), m.expectedTag)->wait(20s);
        ADD_FAILURE() << "no mismatch reported";
      } catch (const MismatchError& e) {
        const std::string expected = "shm recv from rank 0: message mismatch: expected tag " +
                                     std::to_string(m.expectedTag) + " with " + std::to_string(m.expectedBytes) +
                                     " bytes, the peer sent tag " + std::to_string(m.sentTag) + " with " +
                                     std::to_string(m.sentBytes) + " bytes";
        EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
        c.close(e.what(), CloseReason::kMismatch);  // as the communicator does on a failure
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(TagsAndSizes, ShmConnectionMismatch, ::testing::ValuesIn(testing::kMismatchCases));

TEST(ShmConnection, AReceiveWithNoSenderTimesOutNamingThePeer) {
  std::atomic<bool> done{false};
  runLinked(2, kSmallRing, [&](int rank, auto& byPeer) {
    if (rank == 1) {  // alive and silent (leaving would close the link)
      while (!done.load()) std::this_thread::sleep_for(1ms);
      return;
    }
    uint8_t byte = 0;
    try {
      byPeer[1]->postRecv(&byte, 1, 5)->wait(100ms);
      ADD_FAILURE() << "no timeout";
    } catch (const TimeoutError& e) {
      EXPECT_NE(std::string(e.what()).find("shm recv from rank 1 timed out after 100 ms"), std::string::npos)
          << e.what();
    }
    done = true;
  });
}

TEST(ShmConnection, CloseReasonReachesThePeerAsTheMatchingErrorType) {
  for (CloseReason reason : {CloseReason::kNetwork, CloseReason::kTimeout, CloseReason::kMismatch}) {
    runLinked(2, kSmallRing, [&](int rank, auto& byPeer) {
      if (rank == 0) {
        std::this_thread::sleep_for(20ms);  // let rank 1 block first (either order must work)
        byPeer[1]->close("rank 0 saw something wrong", reason);
        return;
      }
      uint8_t byte = 0;
      try {
        byPeer[0]->postRecv(&byte, 1, 9)->wait(20s);
        ADD_FAILURE() << "no error";
      } catch (const MismatchError& e) {
        EXPECT_EQ(reason, CloseReason::kMismatch) << e.what();
      } catch (const TimeoutError& e) {
        EXPECT_EQ(reason, CloseReason::kTimeout) << e.what();
        EXPECT_NE(std::string(e.what()).find("rank 0 saw something wrong"), std::string::npos) << e.what();
      } catch (const NetworkError& e) {
        EXPECT_EQ(reason, CloseReason::kNetwork) << e.what();
        EXPECT_NE(std::string(e.what()).find("rank 0 closed the connection"), std::string::npos) << e.what();
      }
    });
  }
}

TEST(ShmConnection, MessagesSentBeforeTheConnectionIsDestroyedStillArrive) {
  runLinked(2, kSmallRing, [&](int rank, auto& byPeer) {
    const auto msg = pattern(0, 3, 1000);
    if (rank == 0) {
      byPeer[1]->postSend(msg.data(), msg.size(), 1)->wait(20s);
      byPeer[1].reset();  // the job ends on this rank
      return;
    }
    std::this_thread::sleep_for(20ms);
    std::vector<uint8_t> got(msg.size());
    byPeer[0]->postRecv(got.data(), got.size(), 1)->wait(20s);
    EXPECT_EQ(got, msg);
    uint8_t byte = 0;
    EXPECT_THROW(byPeer[0]->postRecv(&byte, 1, 2)->wait(20s), NetworkError);
  });
}

// Rank 1's process is a child we kill: rank 0's pending receive must fail naming it, long
// before its timeout.
TEST(ShmConnection, ADeadPeerProcessFailsThePendingReceiveNamingIt) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  std::atomic<bool> done{false};
  runLinked(2, kSmallRing, [&](int rank, auto& byPeer) {
    if (rank == 1) {
      while (!done.load()) std::this_thread::sleep_for(1ms);  // alive in memory, silent
      return;
    }
    std::thread killer([&] {
      std::this_thread::sleep_for(50ms);
      kill(child, SIGKILL);
      waitpid(child, nullptr, 0);
    });
    uint8_t byte = 0;
    try {
      byPeer[1]->postRecv(&byte, 1, 5)->wait(60s);
      ADD_FAILURE() << "no error";
    } catch (const NetworkError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 1 (pid " + std::to_string(child) + ") died"), std::string::npos)
          << e.what();
    }
    killer.join();
    done = true;
  }, {getpid(), child});
}

TEST(ShmConnection, SendsAndReceivesFromDifferentThreadsAtOnce) {
  constexpr int kMessages = 200;
  runLinked(2, kSmallRing, [&](int rank, auto& byPeer) {
    Connection& c = *byPeer[1 - rank];
    std::thread sender([&] {
      for (int i = 0; i < kMessages; ++i) {
        const auto msg = pattern(rank, i, static_cast<size_t>(i % 7) * 9000);
        c.postSend(msg.data(), msg.size(), static_cast<uint64_t>(i))->wait(20s);
      }
    });
    for (int i = 0; i < kMessages; ++i) {
      std::vector<uint8_t> got(static_cast<size_t>(i % 7) * 9000);
      c.postRecv(got.data(), got.size(), static_cast<uint64_t>(i))->wait(20s);
      EXPECT_EQ(got, pattern(1 - rank, i, got.size())) << "message " << i;
    }
    sender.join();
  });
}

// The transport joins exactly this host's other ranks.
TEST(ShmTransport, ConnectRejectsPeersThatAreNotTheOtherLocalRanks) {
  auto store = bootstrap::makeHashStore();
  StoreLocalPeers local(*store, 0, 2);
  ShmTransport transport(local, kSmallRing, 0us);
  EXPECT_THROW(transport.connect(*store, PeerInfo{0, "", 0, 0}, {}), Error);
  EXPECT_THROW(transport.connect(*store, PeerInfo{0, "", 0, 0}, {PeerInfo{1, "", 1, 0}}), Error);
}

}  // namespace
}  // namespace strata::transport::shm
