// The TCP transport with ranks as threads of one process, sharing a HashStore.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bootstrap/store.h"
#include "core/errors.h"
#include "core/rank_tag.h"
#include "transport/transport.h"
#include "transport/store_testing.h"
#include "transport/transport_testing.h"

namespace strata::transport {
namespace {

using bootstrap::Store;
using testing::connectRank;
using testing::RankEnd;
using testing::runConnected;
using testing::runRanks;
using bootstrap::testing::Clock;
using bootstrap::testing::elapsedSince;
using bootstrap::testing::kTimeout;
using std::chrono::milliseconds;

TransportOptions loopbackOptions(milliseconds timeout = kTimeout, std::string secret = "") {
  TransportOptions opts;
  opts.timeout = timeout;
  opts.bindHost = "127.0.0.1";
  opts.advertiseHost = "127.0.0.1";
  opts.jobSecret = std::move(secret);
  return opts;
}

// Two ranks as threads of this process, connected over loopback TCP.
void runConnectedPair(const std::function<void(int rank, RankEnd& end, bootstrap::Store& store)>& fn) {
  runConnected(2, loopbackOptions(), {}, fn);
}

uint64_t mix(uint64_t x) {  // splitmix64: cheap, and every word differs
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void fillPattern(std::vector<uint8_t>& buffer, uint64_t seed) {
  const size_t words = buffer.size() / 8;
  for (size_t i = 0; i < words; ++i) {
    const uint64_t v = mix(seed * 0x100000001b3ull + i);
    std::memcpy(buffer.data() + i * 8, &v, 8);
  }
  for (size_t i = words * 8; i < buffer.size(); ++i)
    buffer[i] = static_cast<uint8_t>(mix(seed + i));
}

// Number of bytes that differ from the pattern.
size_t countWrong(const std::vector<uint8_t>& buffer, uint64_t seed) {
  std::vector<uint8_t> expected(buffer.size());
  fillPattern(expected, seed);
  size_t wrong = 0;
  for (size_t i = 0; i < buffer.size(); ++i) wrong += buffer[i] != expected[i];
  return wrong;
}

uint64_t seedOf(int rank, int direction, size_t numBytes) {
  return rank * 1000003ull + direction * 7919ull + numBytes;
}

// Expects op->wait() to fail promptly with a NetworkError that is not a timeout (a
// TimeoutError is a NetworkError too, but means the failure never reached us). "Promptly" is
// the error's kind, not a wall-clock window: a failure noticed only by waiting is a timeout.
std::string expectPromptNetworkError(std::unique_ptr<PendingOp> op) {
  try {
    op->wait(kTimeout);
    ADD_FAILURE() << "the op completed; expected a NetworkError";
  } catch (const TimeoutError& e) {
    ADD_FAILURE() << "expected a NetworkError, got a timeout: " << e.what();
  } catch (const NetworkError& e) {
    return e.what();
  }
  return "";
}

// ----- ring exchange ------------------------------------------------------------------

class TcpRingTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

// Every rank sends to its right and its left neighbour and receives from both at once,
// waiting for the receives first: with large messages this only finishes if the
// transport progresses all four transfers in the background.
TEST_P(TcpRingTest, BothDirectionsByteExact) {
  const int worldSize = std::get<0>(GetParam());
  const size_t numBytes = std::get<1>(GetParam());
  constexpr uint64_t kRightTag = 100;
  constexpr uint64_t kLeftTag = 200;
  runConnected(worldSize, loopbackOptions(), {}, [&](int rank, RankEnd& end, bootstrap::Store&) {
    const int right = (rank + 1) % worldSize;
    const int left = (rank + worldSize - 1) % worldSize;
    std::vector<uint8_t> toRight(numBytes), toLeft(numBytes), fromLeft(numBytes),
        fromRight(numBytes);
    fillPattern(toRight, seedOf(rank, 0, numBytes));
    fillPattern(toLeft, seedOf(rank, 1, numBytes));
    // Order matters when left == right (two ranks): the peer receives in this order.
    auto sendRight = end.byPeer[right]->postSend(toRight.data(), numBytes, kRightTag);
    auto sendLeft = end.byPeer[left]->postSend(toLeft.data(), numBytes, kLeftTag);
    auto recvLeft = end.byPeer[left]->postRecv(fromLeft.data(), numBytes, kRightTag);
    auto recvRight = end.byPeer[right]->postRecv(fromRight.data(), numBytes, kLeftTag);
    recvLeft->wait(kTimeout);
    recvRight->wait(kTimeout);
    sendRight->wait(kTimeout);
    sendLeft->wait(kTimeout);
    EXPECT_TRUE(recvLeft->done() && recvRight->done() && sendRight->done() && sendLeft->done());
    EXPECT_EQ(countWrong(fromLeft, seedOf(left, 0, numBytes)), 0u)
        << "rank " << rank << " from left " << left;
    EXPECT_EQ(countWrong(fromRight, seedOf(right, 1, numBytes)), 0u)
        << "rank " << rank << " from right " << right;
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizesAndSizes, TcpRingTest,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Values(size_t{0}, size_t{1}, size_t{13},
                                                              size_t{4096}, (size_t{1} << 20) + 3,
                                                              size_t{64} << 20)),
                         [](const auto& info) {
                           return "world" + std::to_string(std::get<0>(info.param)) + "_bytes" +
                                  std::to_string(std::get<1>(info.param));
                         });

// Many messages in flight per direction, posted and awaited from separate send and
// receive threads on each rank (the pipeline's pattern).
TEST(TcpTransportTest, ManyMessagesFromSeparateSendAndRecvThreads) {
  constexpr int kMessages = 300;
  runConnectedPair([&](int rank, RankEnd& end, bootstrap::Store&) {
    Connection& peer = *end.byPeer[1 - rank];
    std::thread sender([&] {
      std::vector<std::vector<uint8_t>> buffers(kMessages);
      std::vector<std::unique_ptr<PendingOp>> ops;
      for (int i = 0; i < kMessages; ++i) {
        buffers[i].resize(static_cast<size_t>(i * 37 % 5000));
        fillPattern(buffers[i], seedOf(rank, i, buffers[i].size()));
        ops.push_back(
            peer.postSend(buffers[i].data(), buffers[i].size(), static_cast<uint64_t>(i)));
      }
      for (auto& op : ops) op->wait(kTimeout);
    });
    size_t wrong = 0;
    for (int i = 0; i < kMessages; ++i) {
      std::vector<uint8_t> buffer(static_cast<size_t>(i * 37 % 5000));
      peer.postRecv(buffer.data(), buffer.size(), static_cast<uint64_t>(i))->wait(kTimeout);
      wrong += countWrong(buffer, seedOf(1 - rank, i, buffer.size()));
    }
    sender.join();
    EXPECT_EQ(wrong, 0u);
  });
}

// One message larger than 2^31 bytes (send(2) takes at most INT_MAX per call). It needs
// 4.3 GiB of memory (the machines this project targets have 24 GiB) and a few seconds; the
// transport tests run alone (label unit-serial), so it never competes with another test.
TEST(TcpTransportTest, MessageLargerThan2GiB) {
  const size_t numBytes = (size_t{1} << 31) + 4099;
  runConnected(2, loopbackOptions(milliseconds(60000)), {}, [&](int rank, RankEnd& end, bootstrap::Store&) {
    std::vector<uint64_t> words(numBytes / 8 + 1);
    if (rank == 0) {
      for (size_t i = 0; i < words.size(); ++i) words[i] = mix(i);
      end.byPeer[1]->postSend(words.data(), numBytes, 1)->wait(milliseconds(60000));
      return;
    }
    end.byPeer[0]->postRecv(words.data(), numBytes, 1)->wait(milliseconds(60000));
    size_t wrong = 0;
    for (size_t i = 0; i < numBytes / 8; ++i) wrong += words[i] != mix(i);
    const auto* bytes = reinterpret_cast<const uint8_t*>(words.data());
    const uint64_t last = mix(numBytes / 8);
    for (size_t i = numBytes / 8 * 8; i < numBytes; ++i)
      wrong += bytes[i] != reinterpret_cast<const uint8_t*>(&last)[i % 8];
    EXPECT_EQ(wrong, 0u);
  });
}

// ----- mismatches -----------------------------------------------------------------------

using testing::MismatchCase;

class TcpMismatchTest : public ::testing::TestWithParam<MismatchCase> {};

TEST_P(TcpMismatchTest, ReceiverThrowsMismatchErrorNamingPeerTagsAndBytes) {
  const MismatchCase c = GetParam();
  runConnectedPair([&](int rank, RankEnd& end, bootstrap::Store& store) {
    if (rank == 0) {
      std::vector<uint8_t> data(c.sentBytes, 1);
      try {
        end.byPeer[1]->postSend(data.data(), data.size(), c.sentTag)->wait(kTimeout);
      } catch (const NetworkError&) {
        // Legal: the receiver may shut the connection down before our last bytes left.
      }
      // The receiver closes the connection after the mismatch, so we hear about it
      // instead of hanging.
      uint8_t byte = 0;
      expectPromptNetworkError(end.byPeer[1]->postRecv(&byte, 1, 1));
      bootstrap::storeBarrier(store, "done", 2, kTimeout);
      return;
    }
    std::vector<uint8_t> data(c.expectedBytes);
    auto recv = end.byPeer[0]->postRecv(data.data(), data.size(), c.expectedTag);
    try {
      recv->wait(kTimeout);
      ADD_FAILURE() << "a mismatched message was accepted";
    } catch (const MismatchError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("[r1/2]"), std::string::npos) << what;
      EXPECT_NE(what.find("rank 0"), std::string::npos) << what;
      EXPECT_NE(what.find("expected tag " + std::to_string(c.expectedTag) + " with " +
                          std::to_string(c.expectedBytes) + " bytes"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("sent tag " + std::to_string(c.sentTag) + " with " +
                          std::to_string(c.sentBytes) + " bytes"),
                std::string::npos)
          << what;
    }
    // The stream is out of step: later ops on the connection fail too.
    const std::string later =
        expectPromptNetworkError(end.byPeer[0]->postRecv(data.data(), data.size(), c.expectedTag));
    EXPECT_NE(later.find("unusable after an earlier message mismatch"), std::string::npos) << later;
    // A mismatch leaves closing to the owner (which first tells its peers why); rank 0
    // must learn of it from that close, not from our transport going away.
    end.byPeer[0]->close("mismatch reported");
    bootstrap::storeBarrier(store, "done", 2, kTimeout);
  });
}

INSTANTIATE_TEST_SUITE_P(TagsAndSizes, TcpMismatchTest, ::testing::ValuesIn(testing::kMismatchCases));

// ----- failures and timeouts -----------------------------------------------------------

TEST(TcpTransportTest, PeerDestroyedMidwayFailsPendingAndLaterOpsWithNetworkError) {
  runConnected(3, loopbackOptions(), {}, [&](int rank, RankEnd& end, bootstrap::Store& store) {
    bootstrap::storeBarrier(store, "connected", 3, kTimeout);
    if (rank == 0) {
      std::this_thread::sleep_for(milliseconds(100));  // the others are waiting by now
      end.transport.reset();
      uint8_t byte = 0;
      const std::string what = expectPromptNetworkError(end.byPeer[1]->postSend(&byte, 1, 1));
      EXPECT_NE(what.find("closed locally"), std::string::npos) << what;
      return;
    }
    std::vector<uint8_t> data(4096);
    const std::string what =
        expectPromptNetworkError(end.byPeer[0]->postRecv(data.data(), data.size(), 9));
    // Rank 0 closed at a message boundary, so it told us why before going.
    EXPECT_NE(what.find("[r" + std::to_string(rank) +
                        "/3] rank 0 closed the connection during recv of 4096 bytes tag 9: "
                        "the Transport was destroyed"),
              std::string::npos)
        << what;
    expectPromptNetworkError(end.byPeer[0]->postSend(data.data(), data.size(), 10));
    // The connection between ranks 1 and 2 is unaffected.
    const int other = 3 - rank;
    auto send = end.byPeer[other]->postSend(data.data(), 16, 11);
    std::vector<uint8_t> in(16);
    end.byPeer[other]->postRecv(in.data(), in.size(), 11)->wait(kTimeout);
    send->wait(kTimeout);
  });
}

TEST(TcpTransportTest, RecvThatNeverComesTimesOut) {
  runConnectedPair([&](int rank, RankEnd& end, bootstrap::Store& store) {
    if (rank == 1) {
      std::vector<uint8_t> data(512);
      auto recv = end.byPeer[0]->postRecv(data.data(), data.size(), 3);
      const auto start = Clock::now();
      try {
        recv->wait(milliseconds(200));
        ADD_FAILURE() << "a recv nobody sends completed";
      } catch (const TimeoutError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("recv from rank 0 timed out after 200 ms (512 bytes tag 3"),
                  std::string::npos)
            << what;
      }
      // Not before its 200 ms (a lower bound a loaded machine cannot break), and well within
      // ten times that (an upper bound an order of magnitude above the expected time).
      EXPECT_GE(elapsedSince(start).count(), 190);
      EXPECT_LT(elapsedSince(start).count(), 2000);
      EXPECT_FALSE(recv->done());
    }
    // Rank 0 keeps its transport alive until rank 1 has seen the timeout.
    bootstrap::storeBarrier(store, "done", 2, kTimeout);
  });
}

TEST(TcpTransportTest, WrongJobSecretIsRefused) {
  auto store = bootstrap::makeHashStore();
  runRanks(2, [&](int rank) {
    const auto opts = loopbackOptions(milliseconds(1000), rank == 0 ? "secret-A" : "secret-B");
    try {
      connectRank(*store, rank, 2, opts);
      ADD_FAILURE() << "rank " << rank << " connected despite different job secrets";
    } catch (const TimeoutError& e) {
      // Rank 1 refused rank 0 and waits in vain for an acceptable connection; it says why.
      EXPECT_EQ(rank, 1) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank(s) 0"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("refused meanwhile"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("claiming rank 0"), std::string::npos) << e.what();
    } catch (const NetworkError& e) {
      // Rank 0 checked rank 1's proof first and found it wrong.
      EXPECT_EQ(rank, 0) << e.what();
      EXPECT_NE(std::string(e.what()).find("could not prove the job secret"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    }
  });
}

TEST(TcpTransportTest, MatchingJobSecretConnects) {
  runConnected(3, loopbackOptions(kTimeout, "same-secret"), {}, [&](int rank, RankEnd& end, bootstrap::Store&) {
    uint64_t out = rank, in = 99;
    const int right = (rank + 1) % 3;
    const int left = (rank + 2) % 3;
    auto send = end.byPeer[right]->postSend(&out, sizeof(out), 1);
    end.byPeer[left]->postRecv(&in, sizeof(in), 1)->wait(kTimeout);
    send->wait(kTimeout);
    EXPECT_EQ(in, static_cast<uint64_t>(left));
  });
}

TEST(TcpTransportTest, MissingPeerTimesOutNamingIt) {
  auto store = bootstrap::makeHashStore();
  setThreadRankTag(0, 2);
  auto transport = makeTcpTransport(loopbackOptions(milliseconds(200)));
  try {
    transport->connect(*store, PeerInfo{0, "127.0.0.1", 0, 0}, {PeerInfo{1, "127.0.0.1", 0, 0}});
    FAIL() << "connected to a rank that never started";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 did not publish its address"), std::string::npos)
        << e.what();
  }
}

TEST(TcpTransportTest, DestroyingAPendingOpFailsTheConnectionInsteadOfCorruptingMemory) {
  runConnectedPair([&](int rank, RankEnd& end, bootstrap::Store& store) {
    if (rank == 1) {
      {
        std::vector<uint8_t> doomed(1024);
        auto recv = end.byPeer[0]->postRecv(doomed.data(), doomed.size(), 1);
      }  // destroyed unfinished: its buffer is gone, so the connection must stop using it
      std::vector<uint8_t> later(1024);
      expectPromptNetworkError(end.byPeer[0]->postRecv(later.data(), later.size(), 2));
    }
    bootstrap::storeBarrier(store, "done", 2, kTimeout);
  });
}

}  // namespace
}  // namespace strata::transport

namespace strata::transport {
namespace {

// close(why, reason) at a message boundary sends the peer an abort frame: its pending
// receive fails with the matching error type and the reason text.
TEST(TcpTransportTest, CloseTellsThePeerWhyWithTheErrorType) {
  for (CloseReason reason : {CloseReason::kNetwork, CloseReason::kTimeout, CloseReason::kMismatch}) {
    std::atomic<int> checked{0};
    runConnectedPair([&](int rank, RankEnd& end, bootstrap::Store& store) {
      bootstrap::storeBarrier(store, "connected", 2, kTimeout);
      if (rank == 0) {
        end.byPeer[1]->close("rank 0 saw something wrong", reason);
        bootstrap::storeBarrier(store, "done", 2, kTimeout);
        return;
      }
      std::vector<uint8_t> data(64);
      auto recv = end.byPeer[0]->postRecv(data.data(), data.size(), 5);
      try {
        recv->wait(kTimeout);
        ADD_FAILURE() << "no error";
      } catch (const MismatchError& e) {
        EXPECT_EQ(reason, CloseReason::kMismatch) << e.what();
        EXPECT_NE(std::string(e.what()).find("rank 0 saw something wrong"), std::string::npos) << e.what();
        ++checked;
      } catch (const TimeoutError& e) {
        EXPECT_EQ(reason, CloseReason::kTimeout) << e.what();
        EXPECT_NE(std::string(e.what()).find("rank 0 saw something wrong"), std::string::npos) << e.what();
        ++checked;
      } catch (const NetworkError& e) {
        EXPECT_EQ(reason, CloseReason::kNetwork) << e.what();
        EXPECT_NE(std::string(e.what()).find("rank 0 saw something wrong"), std::string::npos) << e.what();
        ++checked;
      }
      bootstrap::storeBarrier(store, "done", 2, kTimeout);
    });
    EXPECT_EQ(checked.load(), 1);
  }
}

}  // namespace
}  // namespace strata::transport
