// The TcpStore's authentication (bootstrap/store_auth.h): a client with the job secret is
// served, one with another secret or none is refused at once (and logged by the server,
// which keeps serving), a raw socket that sends requests without authenticating changes
// nothing, a fake server that cannot prove the secret is refused by the client, the secret
// never crosses the wire, and the server listens only on the address it was given.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "bootstrap/store.h"
#include "bootstrap/store_auth.h"
#include "core/errors.h"
#include "transport/store_testing.h"
#include "testing/wire_tap.h"

namespace strata::bootstrap {
namespace {

using std::chrono::milliseconds;
using testing::Clock;
using testing::kHost;
using testing::kTimeout;
const char* const kSecret = "correct horse battery staple";

std::shared_ptr<TcpStore> makeStore(const std::string& secret, uint16_t port, bool isServer, int rank,
                                    milliseconds timeout = kTimeout) {
  TcpStoreOptions o;
  o.host = kHost;
  o.port = port;
  o.isServer = isServer;
  o.timeout = timeout;
  o.secret = secret;
  o.rank = rank;
  return TcpStore::create(o);
}

// The StoreError text of a client that fails to connect ("" when it connected).
std::string clientError(const std::string& secret, uint16_t port, milliseconds timeout = milliseconds(3000)) {
  try {
    makeStore(secret, port, false, 5, timeout);
  } catch (const ConfigError& e) {
    return std::string("ConfigError: ") + e.what();
  } catch (const StoreError& e) {
    return std::string("StoreError: ") + e.what();
  }
  return "";
}

int rawConnect(const char* host, uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, host, &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads until the peer closes or 3 s pass; what arrived.
std::string drain(int fd) {
  std::string got;
  char buf[256];
  const auto deadline = Clock::now() + milliseconds(3000);
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

TEST(StoreAuthTest, ClientsWithTheSecretAreServed) {
  auto server = makeStore(kSecret, 0, true, 0);
  auto client = makeStore(kSecret, server->port(), false, 1);
  setString(*client, "addr/1", "10.0.0.2:7");
  EXPECT_EQ(getString(*server, "addr/1", kTimeout), "10.0.0.2:7");
  EXPECT_EQ(client->add("n", 2), 2);
}

TEST(StoreAuthTest, WrongOrMissingSecretIsRefusedAtOnceAndTheServerGoesOn) {
  auto server = makeStore(kSecret, 0, true, 0);
  // The client's connect timeout is long (30 s), so "at once" needs no tight window: a refusal
  // takes milliseconds, and one that waited for the timeout would take 30 s.
  constexpr milliseconds kLongTimeout{30000};
  for (const std::string& secret : {std::string("another secret"), std::string()}) {
    const auto start = Clock::now();
    const std::string error = clientError(secret, server->port(), kLongTimeout);
    EXPECT_EQ(error.rfind("ConfigError: ", 0), 0u) << "a refusal is not worth a retry: " << error;
    EXPECT_NE(error.find("refused our proof of the job secret: wrong job secret"), std::string::npos) << error;
    EXPECT_NE(error.find("STRATA_JOB_SECRET"), std::string::npos) << error;
    EXPECT_NE(error.find(std::string(kHost) + ":" + std::to_string(server->port())), std::string::npos) << error;
    EXPECT_LT(Clock::now() - start, kLongTimeout / 2) << "a refusal must not wait for the connect timeout";
  }
  // The refusals are recorded (address, claimed rank, why) for ranks that time out later.
  const std::string refusals = getString(*server, kStoreRefusalsKey, kTimeout);
  EXPECT_NE(refusals.find("claiming rank 5: wrong job secret"), std::string::npos) << refusals;
  auto good = makeStore(kSecret, server->port(), false, 1);
  setString(*good, "still", "serving");
  EXPECT_EQ(getString(*server, "still", kTimeout), "serving");
}

TEST(StoreAuthTest, RequestsWithoutAuthenticationChangeNothing) {
  auto server = makeStore(kSecret, 0, true, 0);
  // A well-formed set request of the store protocol, sent without the authentication step.
  const std::string key = "rogue/key";
  Bytes frame;
  const uint32_t body = static_cast<uint32_t>(1 + 4 + key.size() + 5);
  frame.insert(frame.end(), reinterpret_cast<const uint8_t*>(&body), reinterpret_cast<const uint8_t*>(&body) + 4);
  frame.push_back(1);  // kSet
  const uint32_t keyBytes = static_cast<uint32_t>(key.size());
  frame.insert(frame.end(), reinterpret_cast<const uint8_t*>(&keyBytes),
               reinterpret_cast<const uint8_t*>(&keyBytes) + 4);
  frame.insert(frame.end(), key.begin(), key.end());
  for (char c : std::string("value")) frame.push_back(static_cast<uint8_t>(c));
  if (frame.size() < detail::kClientProofBytes) frame.resize(detail::kClientProofBytes, 0);
  const int fd = rawConnect(kHost, server->port());
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::send(fd, frame.data(), frame.size(), 0), static_cast<ssize_t>(frame.size()));
  const std::string answer = drain(fd);
  ::close(fd);
  // It got the server's challenge, then one refusal byte, then the server closed.
  ASSERT_EQ(answer.size(), detail::kServerHelloBytes + 1) << "the server answered a request it should not serve";
  EXPECT_EQ(static_cast<uint8_t>(answer.back()), static_cast<uint8_t>(detail::AuthVerdict::kMalformed));
  auto good = makeStore(kSecret, server->port(), false, 1);
  EXPECT_FALSE(good->check(key)) << "an unauthenticated request changed the store";
  const std::string refusals = getString(*good, kStoreRefusalsKey, kTimeout);
  EXPECT_NE(refusals.find("not a strata store authentication message"), std::string::npos) << refusals;
}

// A server that speaks the protocol but does not know the secret: it sends a hello, then
// accepts whatever proof comes with a made-up proof of its own.
TEST(StoreAuthTest, ClientRefusesAServerThatCannotProveTheSecret) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::thread fake([listener] {
    const int fd = ::accept(listener, nullptr, nullptr);
    const Bytes hello = detail::encodeServerHello(auth::freshNonce());
    ::send(fd, hello.data(), hello.size(), 0);
    uint8_t proof[detail::kClientProofBytes];
    size_t got = 0;
    while (got < sizeof(proof)) {
      const ssize_t n = ::recv(fd, proof + got, sizeof(proof) - got, 0);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    uint8_t verdict[detail::kVerdictAcceptedBytes] = {0};
    std::memset(verdict + 1, 0x42, auth::kMacBytes);
    ::send(fd, verdict, sizeof(verdict), 0);
    drain(fd);
    ::close(fd);
  });
  const std::string error = clientError(kSecret, ntohs(addr.sin_port));
  fake.join();
  ::close(listener);
  EXPECT_NE(error.find("StoreError: "), std::string::npos) << error;
  EXPECT_NE(error.find("could not prove it holds the job secret"), std::string::npos) << error;
}

TEST(StoreAuthTest, TheSecretNeverCrossesTheWire) {
  auto server = makeStore(kSecret, 0, true, 0);
  const uint16_t port = server->port();
  strata::testing::WireTap tap([port] { return std::make_pair(std::string(kHost), port); });
  auto client = makeStore(kSecret, tap.port(), false, 1);
  setString(*client, "k", "v");
  EXPECT_EQ(getString(*client, "k", kTimeout), "v");
  EXPECT_EQ(tap.connections(), 1);
  const std::string up = tap.clientToServer();
  const std::string down = tap.serverToClient();
  EXPECT_GE(up.size(), detail::kClientProofBytes) << "the tap saw no handshake";
  EXPECT_EQ(up.find(kSecret), std::string::npos);
  EXPECT_EQ(down.find(kSecret), std::string::npos);
  EXPECT_NE(up.find("k"), std::string::npos) << "the tap does not see the requests";
}

TEST(StoreAuthTest, ServerListensOnlyOnItsAddress) {
  auto server = makeStore(kSecret, 0, true, 0);
  // 127.0.0.2 is this machine too (all of 127/8 is loopback), but not the bound address.
  const int other = rawConnect("127.0.0.2", server->port());
  EXPECT_LT(other, 0) << "the store accepted a connection on an address it was not given";
  if (other >= 0) ::close(other);
  const int same = rawConnect(kHost, server->port());
  EXPECT_GE(same, 0);
  if (same >= 0) ::close(same);
}

TEST(StoreAuthTest, WildcardBindHostListensEverywhere) {
  TcpStoreOptions o;
  o.host = kHost;
  o.isServer = true;
  o.timeout = kTimeout;
  o.secret = kSecret;
  o.bindHost = "0.0.0.0";
  auto server = TcpStore::create(o);
  const int other = rawConnect("127.0.0.2", server->port());
  EXPECT_GE(other, 0);
  if (other >= 0) ::close(other);
}

}  // namespace
}  // namespace strata::bootstrap
