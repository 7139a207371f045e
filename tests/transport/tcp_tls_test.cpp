// TLS on the TCP transport between hosts (issues #8, #17), ranks as threads of one process
// each on its own host name: the bytes must arrive exactly as over plain TCP, a wrong
// secret or encryption on one side only must fail with a clear error instead of
// connecting or hanging.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bootstrap/store.h"
#include "core/errors.h"
#include "core/hex.h"
#include "core/rank_tag.h"
#include "transport/tcp/tls.h"
#include "transport/transport.h"
#include "transport/transport_testing.h"

namespace strata::transport {
namespace {

using bootstrap::Store;
using testing::connectRank;
using testing::RankEnd;
using testing::runConnected;
using testing::runRanks;
using std::chrono::milliseconds;

constexpr milliseconds kTimeout{10000};

TransportOptions tlsOptions(bool tls, std::string secret, milliseconds timeout = kTimeout) {
  TransportOptions opts;
  opts.timeout = timeout;
  opts.bindHost = "127.0.0.1";
  opts.advertiseHost = "127.0.0.1";
  opts.jobSecret = std::move(secret);
  opts.encryptInterHost = tls;
  return opts;
}

// Every rank on a host of its own, so every pair uses TLS when encryption is on.
std::vector<std::string> ownHosts(int worldSize) {
  std::vector<std::string> hosts;
  for (int r = 0; r < worldSize; ++r) hosts.push_back("host" + std::to_string(r));
  return hosts;
}

std::vector<uint8_t> pattern(size_t numBytes, uint64_t seed) {
  std::vector<uint8_t> bytes(numBytes);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& b : bytes) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
    b = static_cast<uint8_t>(x);
  }
  return bytes;
}

// Every rank sends a message of each size to its right neighbour and receives from its
// left, all posted at once; returns what each rank received, by rank then size.
std::vector<std::vector<std::vector<uint8_t>>> ringExchange(bool tls, int worldSize,
                                                            const std::vector<size_t>& sizes) {
  std::vector<std::vector<std::vector<uint8_t>>> received(worldSize);
  const TransportOptions opts = tlsOptions(tls, "job-42");
  runConnected(worldSize, opts, ownHosts(worldSize), [&](int rank, RankEnd& end, bootstrap::Store&) {
    for (int r = 0; r < worldSize; ++r) {
      if (r != rank) {
        EXPECT_EQ(end.byPeer[r]->encrypted(), tls) << "rank " << rank << " to " << r;
      }
    }
    const int right = (rank + 1) % worldSize;
    const int left = (rank + worldSize - 1) % worldSize;
    std::vector<std::vector<uint8_t>> out;
    auto& in = received[rank];
    std::vector<std::unique_ptr<PendingOp>> ops;
    for (size_t i = 0; i < sizes.size(); ++i) {
      out.push_back(pattern(sizes[i], static_cast<uint64_t>(rank * 100 + i)));
      in.emplace_back(sizes[i]);
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      ops.push_back(end.byPeer[right]->postSend(out[i].data(), sizes[i], i));
      ops.push_back(end.byPeer[left]->postRecv(in[i].data(), sizes[i], i));
    }
    for (auto& op : ops) op->wait(kTimeout);
  });
  return received;
}

// ----- pure parts ------------------------------------------------------------------------

TEST(TlsKeyTest, PskIsHkdfOfTheSecret) {
  // Golden value: RFC 5869 HKDF-SHA256 in Python (tests/core/auth_test.cpp), salt
  // b"strata job secret v1", info b"strata tls psk v1".
  const auto key = tcp::derivePsk("job-42");
  EXPECT_EQ(toHex(key), "5ca4d0ccd5fcfe25c4721715a0f8609f76230a0aa9f1f7242aac42b08eb9c5d5");
  EXPECT_NE(tcp::derivePsk("job-43"), key);
}

TEST(TlsKeyTest, TlsWithoutASecretIsRefusedNamingTheVariable) {
  EXPECT_NO_THROW(tcp::checkTlsOptions(false, ""));
  EXPECT_NO_THROW(tcp::checkTlsOptions(true, "s"));
  try {
    makeTcpTransport(tlsOptions(true, ""));
    FAIL() << "a TLS transport without a secret was created";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("STRATA_JOB_SECRET"), std::string::npos) << e.what();
  }
}

// ----- same bytes as plain ---------------------------------------------------------------

TEST(TcpTlsTest, RingGivesTheSameBytesAsPlainTcp) {
  // Around the 16 KiB TLS record size, and well above 1 MiB.
  const std::vector<size_t> sizes = {0,     1,     15,    16,          17,
                                     16367, 16368, 16384, 16385,       (size_t{1} << 20) + 3,
                                     size_t{9} << 20};
  for (int worldSize : {2, 3}) {
    const auto plain = ringExchange(false, worldSize, sizes);
    const auto tls = ringExchange(true, worldSize, sizes);
    for (int rank = 0; rank < worldSize; ++rank) {
      const int left = (rank + worldSize - 1) % worldSize;
      for (size_t i = 0; i < sizes.size(); ++i) {
        const auto expected = pattern(sizes[i], static_cast<uint64_t>(left * 100 + i));
        EXPECT_TRUE(plain[rank][i] == expected) << "plain world " << worldSize << " rank " << rank << " size " << sizes[i];
        EXPECT_TRUE(tls[rank][i] == plain[rank][i]) << "tls world " << worldSize << " rank " << rank << " size " << sizes[i];
      }
    }
  }
}

// Sends and receives of one connection on different threads at once: the session must
// serialise its OpenSSL calls.
TEST(TcpTlsTest, ManyMessagesFromSeparateSendAndRecvThreads) {
  constexpr int kMessages = 300;
  runConnected(2, tlsOptions(true, "job-42"), ownHosts(2), [&](int rank, RankEnd& end, bootstrap::Store&) {
    Connection& peer = *end.byPeer[1 - rank];
    std::thread sender([&] {
      std::vector<std::vector<uint8_t>> buffers;
      std::vector<std::unique_ptr<PendingOp>> ops;
      for (int i = 0; i < kMessages; ++i) buffers.push_back(pattern(static_cast<size_t>(i * 977 % 40000), rank * 1000 + i));
      for (int i = 0; i < kMessages; ++i)
        ops.push_back(peer.postSend(buffers[i].data(), buffers[i].size(), static_cast<uint64_t>(i)));
      for (auto& op : ops) op->wait(kTimeout);
    });
    int wrong = 0;
    for (int i = 0; i < kMessages; ++i) {
      std::vector<uint8_t> buffer(static_cast<size_t>(i * 977 % 40000));
      peer.postRecv(buffer.data(), buffer.size(), static_cast<uint64_t>(i))->wait(kTimeout);
      wrong += buffer != pattern(buffer.size(), (1 - rank) * 1000 + i);
    }
    sender.join();
    EXPECT_EQ(wrong, 0);
  });
}

// An abort frame travels inside TLS too: the peer learns why.
TEST(TcpTlsTest, CloseTellsThePeerWhy) {
  runConnected(2, tlsOptions(true, "job-42"), ownHosts(2), [&](int rank, RankEnd& end, bootstrap::Store& store) {
    bootstrap::storeBarrier(store, "connected", 2, kTimeout);
    if (rank == 0) {
      end.byPeer[1]->close("rank 0 saw something wrong", CloseReason::kTimeout);
    } else {
      std::vector<uint8_t> data(64);
      try {
        end.byPeer[0]->postRecv(data.data(), data.size(), 5)->wait(kTimeout);
        ADD_FAILURE() << "no error";
      } catch (const TimeoutError& e) {
        EXPECT_NE(std::string(e.what()).find("rank 0 saw something wrong"), std::string::npos) << e.what();
      }
    }
    bootstrap::storeBarrier(store, "done", 2, kTimeout);
  });
}

// ----- only between hosts ----------------------------------------------------------------

// Ranks 0 and 1 share a host, rank 2 is alone: only the pairs with rank 2 encrypt, and
// every pair still carries the same bytes.
TEST(TcpTlsTest, OnlyPairsOnDifferentHostsEncrypt) {
  const std::vector<std::string> hosts = {"node-a", "node-a", "node-b"};
  runConnected(3, tlsOptions(true, "job-42"), hosts, [&](int rank, RankEnd& end, bootstrap::Store& store) {
    for (int r = 0; r < 3; ++r) {
      if (r == rank) continue;
      EXPECT_EQ(end.byPeer[r]->encrypted(), hosts[r] != hosts[rank]) << "rank " << rank << " to " << r;
      std::vector<uint8_t> out = pattern(70000, static_cast<uint64_t>(rank * 10 + r)), in(70000);
      auto send = end.byPeer[r]->postSend(out.data(), out.size(), 1);
      end.byPeer[r]->postRecv(in.data(), in.size(), 1)->wait(kTimeout);
      send->wait(kTimeout);
      EXPECT_TRUE(in == pattern(70000, static_cast<uint64_t>(r * 10 + rank))) << "rank " << rank << " from " << r;
    }
    bootstrap::storeBarrier(store, "done", 3, kTimeout);
  });
}

// ----- refused peers ---------------------------------------------------------------------

// Rank 0 dials rank 1 (lower ranks dial higher ones). Returns each rank's error text,
// prefixed "timeout: " for a TimeoutError; "" when it connected.
std::vector<std::string> connectExpectingFailure(const TransportOptions& rank0, const TransportOptions& rank1) {
  auto store = bootstrap::makeHashStore();
  std::vector<std::string> errors(2);
  runRanks(2, [&](int rank) {
    try {
      connectRank(*store, rank, 2, rank == 0 ? rank0 : rank1, ownHosts(2));
    } catch (const TimeoutError& e) {
      errors[rank] = std::string("timeout: ") + e.what();
    } catch (const NetworkError& e) {
      errors[rank] = e.what();
    }
  });
  return errors;
}

// A refused pair: rank 0 (the dialer) and rank 1 (the acceptor) disagree on the secret or
// on encryption. The dialer fails at once naming the cause; the acceptor refuses the
// connection and waits in vain for a good one, and its timeout error says why.
struct RefusalCase {
  const char* name;
  bool dialerTls;
  const char* dialerSecret;
  bool acceptorTls;
  const char* acceptorSecret;
  std::vector<std::string> dialerSays;    // fragments of rank 0's error
  std::vector<std::string> acceptorSays;  // fragments of rank 1's error, after "timeout: "
};

std::ostream& operator<<(std::ostream& os, const RefusalCase& c) { return os << c.name; }

const RefusalCase kRefusals[] = {
    {"WrongSecretFailsTheTlsHandshake", true, "secret-A", true, "secret-B",
     {"TLS with rank 1", "STRATA_JOB_SECRET"}, {"rank(s) 0", "refused meanwhile", "claiming rank 0"}},
    // The acceptor sees the Hello's flag differ from its own decision and refuses before any
    // TLS byte, naming the setting.
    {"EncryptionOnTheDialingSideOnly", true, "s", false, "s", {"rank 1", "encryption setting differs"},
     {"encryption setting differs"}},
    {"EncryptionOnTheAcceptingSideOnly", false, "s", true, "s", {"rank 1", "STRATA_TLS"}, {}},
};

class TcpTlsRefusal : public ::testing::TestWithParam<RefusalCase> {};

TEST_P(TcpTlsRefusal, FailsClearlyOnBothSides) {
  const RefusalCase& c = GetParam();
  const auto errors = connectExpectingFailure(tlsOptions(c.dialerTls, c.dialerSecret, milliseconds(1500)),
                                              tlsOptions(c.acceptorTls, c.acceptorSecret, milliseconds(1500)));
  EXPECT_EQ(errors[0].find("timeout: "), std::string::npos) << errors[0];
  for (const std::string& part : c.dialerSays) EXPECT_NE(errors[0].find(part), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("timeout: "), std::string::npos) << errors[1];
  for (const std::string& part : c.acceptorSays) EXPECT_NE(errors[1].find(part), std::string::npos) << errors[1];
}

INSTANTIATE_TEST_SUITE_P(TcpTlsTest, TcpTlsRefusal, ::testing::ValuesIn(kRefusals),
                         [](const ::testing::TestParamInfo<RefusalCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace strata::transport
