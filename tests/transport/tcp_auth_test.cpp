// The TCP transport's challenge-response (transport/tcp/handshake.h): the job secret never
// crosses the wire, and a recorded (replayed) or reflected proof is refused by the acceptor,
// which names the refused connection when it gives up.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/store.h"
#include "core/errors.h"
#include "core/socket.h"
#include "testing/wire_tap.h"
#include "transport/tcp/handshake.h"
#include "transport/transport.h"
#include "transport/transport_testing.h"

namespace strata::transport {
namespace {

using std::chrono::milliseconds;
using testing::connectRank;
using testing::RankEnd;
using testing::runRanks;

constexpr milliseconds kTimeout{10000};
const char* const kSecret = "the-job-secret-0123456789";

TransportOptions options(const std::string& secret, milliseconds timeout = kTimeout) {
  TransportOptions o;
  o.timeout = timeout;
  o.bindHost = "127.0.0.1";
  o.advertiseHost = "127.0.0.1";
  o.jobSecret = secret;
  return o;
}

// Passes everything to `inner`, except that a get of `key` answers `replacement` (a
// dialer then connects through a WireTap instead of to the published address).
class RedirectingStore final : public bootstrap::Store {
 public:
  RedirectingStore(std::shared_ptr<bootstrap::Store> inner, std::string key, std::string replacement)
      : inner_(std::move(inner)), key_(std::move(key)), replacement_(std::move(replacement)) {}
  void set(const std::string& key, const bootstrap::Bytes& value) override { inner_->set(key, value); }
  bootstrap::Bytes get(const std::string& key, milliseconds timeout) override {
    bootstrap::Bytes value = inner_->get(key, timeout);
    if (key == key_) value.assign(replacement_.begin(), replacement_.end());
    return value;
  }
  int64_t add(const std::string& key, int64_t delta) override { return inner_->add(key, delta); }
  bool check(const std::string& key) override { return inner_->check(key); }

 private:
  std::shared_ptr<bootstrap::Store> inner_;
  std::string key_, replacement_;
};

std::pair<std::string, uint16_t> publishedAddress(bootstrap::Store& store, int rank) {
  std::string host;
  uint16_t port = 0;
  const std::string text = bootstrap::getString(store, "tcp/addr/" + std::to_string(rank), kTimeout);
  EXPECT_TRUE(net::parseHostPort(text, &host, &port)) << text;
  return {host, port};
}

int rawConnect(const std::pair<std::string, uint16_t>& address) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(address.second);
  ::inet_pton(AF_INET, address.first.c_str(), &addr.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

std::string recvExactly(int fd, size_t numBytes) {
  std::string out(numBytes, '\0');
  int err = 0;
  const auto io = net::recvAll(fd, out.data(), numBytes, net::Clock::now() + kTimeout, &err);
  EXPECT_EQ(io, net::IoStatus::kOk);
  return out;
}

// Rank 1 of a 2-rank job accepting with kSecret on its own store, while the test plays
// rank 0 over a raw socket. The acceptor gives up after 3 s; errorWhenDone() is its error.
class LoneAcceptor {
 public:
  LoneAcceptor()
      : thread_([this] {
          try {
            connectRank(*store_, 1, 2, options(kSecret, milliseconds(3000)));
          } catch (const TimeoutError& e) {
            error_ = e.what();
          }
        }) {}
  ~LoneAcceptor() {
    if (thread_.joinable()) thread_.join();
  }
  int connectAsRank0() { return rawConnect(publishedAddress(*store_, 1)); }
  std::string errorWhenDone() {
    thread_.join();
    return error_;
  }

 private:
  std::shared_ptr<bootstrap::Store> store_ = bootstrap::makeHashStore();
  std::string error_;
  std::thread thread_;
};

// Rank 0 dials rank 1 through a tap; both exchange one message. Returns the tap's record.
struct Recorded {
  std::string up, down;
};
Recorded connectThroughTap(const std::string& secret) {
  auto inner = bootstrap::makeHashStore();
  strata::testing::WireTap tap([&] { return publishedAddress(*inner, 1); });
  auto redirected =
      std::make_shared<RedirectingStore>(inner, "tcp/addr/1", "127.0.0.1:" + std::to_string(tap.port()));
  runRanks(2, [&](int rank) {
    RankEnd end = connectRank(rank == 0 ? static_cast<bootstrap::Store&>(*redirected) : *inner, rank, 2,
                              options(secret));
    uint64_t out = 100 + rank, in = 0;
    auto send = end.byPeer[1 - rank]->postSend(&out, sizeof(out), 7);
    end.byPeer[1 - rank]->postRecv(&in, sizeof(in), 7)->wait(kTimeout);
    send->wait(kTimeout);
    EXPECT_EQ(in, static_cast<uint64_t>(101 - rank));
    bootstrap::storeBarrier(*inner, "done", 2, kTimeout);
  });
  EXPECT_EQ(tap.connections(), 1);
  return {tap.clientToServer(), tap.serverToClient()};
}

TEST(TcpAuthTest, TheSecretNeverCrossesTheWire) {
  const Recorded r = connectThroughTap(kSecret);
  // Hello, proof and one framed message one way; status, challenge, verdict and one
  // message the other way: the tap saw the whole handshake.
  EXPECT_GE(r.up.size(), 48u + 32u);
  EXPECT_GE(r.down.size(), 1u + 64u + 1u);
  EXPECT_EQ(r.up.find(kSecret), std::string::npos);
  EXPECT_EQ(r.down.find(kSecret), std::string::npos);
}

// An attacker who recorded a good connection replays the dialer's bytes to a new connect()
// of the acceptor: the acceptor's fresh nonce makes the old proof fail.
TEST(TcpAuthTest, ReplayedProofIsRefused) {
  const Recorded r = connectThroughTap(kSecret);
  ASSERT_GE(r.up.size(), 80u);
  const std::string hello = r.up.substr(0, 48);
  const std::string oldProof = r.up.substr(48, 32);

  LoneAcceptor acceptor;
  const int fd = acceptor.connectAsRank0();
  ASSERT_EQ(::send(fd, hello.data(), hello.size(), 0), 48);
  const std::string statusAndChallenge = recvExactly(fd, 1 + 64);
  EXPECT_EQ(statusAndChallenge[0], static_cast<char>(tcp::HelloStatus::kAccepted));
  ASSERT_EQ(::send(fd, oldProof.data(), oldProof.size(), 0), 32);
  const std::string verdict = recvExactly(fd, 1);
  EXPECT_EQ(verdict[0], static_cast<char>(tcp::HelloStatus::kWrongSecret));
  ::close(fd);
  const std::string acceptorError = acceptor.errorWhenDone();
  EXPECT_NE(acceptorError.find("refused meanwhile"), std::string::npos) << acceptorError;
  EXPECT_NE(acceptorError.find("claiming rank 0"), std::string::npos) << acceptorError;
  EXPECT_NE(acceptorError.find("wrong job secret"), std::string::npos) << acceptorError;
}

// An attacker without the secret sends the acceptor's own proof back as its answer.
TEST(TcpAuthTest, ReflectedProofIsRefused) {
  LoneAcceptor acceptor;
  const int fd = acceptor.connectAsRank0();
  tcp::Hello hello{0, 1, false, auth::freshNonce()};
  int err = 0;
  ASSERT_EQ(tcp::sendHello(fd, hello, net::Clock::now() + kTimeout, &err), net::IoStatus::kOk);
  const std::string statusAndChallenge = recvExactly(fd, 1 + 64);
  ASSERT_EQ(statusAndChallenge[0], static_cast<char>(tcp::HelloStatus::kAccepted));
  const std::string theirProof = statusAndChallenge.substr(1 + 32, 32);
  ASSERT_EQ(::send(fd, theirProof.data(), theirProof.size(), 0), 32);
  EXPECT_EQ(recvExactly(fd, 1)[0], static_cast<char>(tcp::HelloStatus::kWrongSecret));
  ::close(fd);
  const std::string acceptorError = acceptor.errorWhenDone();
  EXPECT_NE(acceptorError.find("wrong job secret"), std::string::npos) << acceptorError;
}

TEST(TcpAuthTest, PairsUseTlsOnlyAcrossHostsAndOnlyWhenAsked) {
  EXPECT_FALSE(tcp::pairUsesTls(false, "a", "b"));
  EXPECT_FALSE(tcp::pairUsesTls(true, "a", "a"));
  EXPECT_TRUE(tcp::pairUsesTls(true, "a", "b"));
  EXPECT_TRUE(tcp::pairUsesTls(true, "node#0", "node#1")) << "pretend hosts of STRATA_HOSTS count as hosts";
}

}  // namespace
}  // namespace strata::transport
