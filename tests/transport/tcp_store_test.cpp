// TcpStore: server and clients in one process over loopback.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "bootstrap/store.h"
#include "core/errors.h"
#include "transport/store_testing.h"

namespace strata::bootstrap {
namespace {

using std::chrono::milliseconds;
using testing::Clock;
using testing::elapsedSince;
using testing::kHost;
using testing::kTimeout;

// A raw loopback socket connected to port (to play a misbehaving client).
int rawConnect(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

TEST(TcpStoreTest, ServerAndClientSetGetAddCheck) {
  auto server = TcpStore::create(kHost, 0, true, kTimeout);
  ASSERT_NE(server->port(), 0);
  auto client = TcpStore::create(kHost, server->port(), false, kTimeout);
  EXPECT_EQ(client->port(), server->port());
  client->set("k", Bytes{9, 8, 7});
  EXPECT_EQ(server->get("k", kTimeout), (Bytes{9, 8, 7}));
  client->set("empty", Bytes{});
  EXPECT_EQ(server->get("empty", kTimeout), Bytes{});
  EXPECT_TRUE(server->check("empty"));
  EXPECT_FALSE(client->check("nope"));
  EXPECT_EQ(client->add("n", 40), 40);
  EXPECT_EQ(server->add("n", 2), 42);
  EXPECT_EQ(client->add("n", -50), -8);
  EXPECT_EQ(getString(*client, "n", kTimeout), "-8");
  const Bytes big(3 << 20, 0x5a);  // several reads and writes on both sides
  server->set("big", big);
  EXPECT_EQ(client->get("big", kTimeout), big);
}

TEST(TcpStoreTest, WaitingGetDoesNotBlockOtherClients) {
  auto server = TcpStore::create(kHost, 0, true, kTimeout);
  auto waiter = TcpStore::create(kHost, server->port(), false, kTimeout);
  auto other = TcpStore::create(kHost, server->port(), false, kTimeout);
  // No clock: were the parked get to block the server, the other client's calls could only be
  // served once it gave up (its 4 s timeout), and then the get would not see the key.
  std::atomic<bool> got{false};
  std::string value;
  std::thread waiting([&] {
    try {
      value = getString(*waiter, "late", milliseconds(4000));
    } catch (const std::exception& e) {
      value = std::string("get failed: ") + e.what();
    }
    got = true;
  });
  std::this_thread::sleep_for(milliseconds(50));  // let the get park on the server
  for (int i = 0; i < 100; ++i) {
    other->add("busy", 1);
    setString(*other, "key" + std::to_string(i), "v");
  }
  EXPECT_FALSE(got.load()) << "the get returned before the key was set: " << value;
  setString(*other, "late", "here");
  waiting.join();
  EXPECT_EQ(value, "here");
}

TEST(TcpStoreTest, GetTimesOutNamingTheKeyAndTheClientStaysUsable) {
  auto server = TcpStore::create(kHost, 0, true, kTimeout);
  auto client = TcpStore::create(kHost, server->port(), false, kTimeout);
  testing::expectGetTimesOutNamingTheKey(*client, "never/set", milliseconds(200));
  setString(*client, "after", "ok");
  EXPECT_EQ(getString(*server, "after", kTimeout), "ok");
}

TEST(TcpStoreTest, EightClientThreadsRendezvous) {
  constexpr int kClients = 8;
  auto server = TcpStore::create(kHost, 0, true, kTimeout);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto client = TcpStore::create(kHost, server->port(), false, kTimeout);
      client->add("arrived", 1);
      setString(*client, "addr/" + std::to_string(i), "rank" + std::to_string(i));
      for (int j = 0; j < kClients; ++j) {
        if (getString(*client, "addr/" + std::to_string(j), kTimeout) != "rank" + std::to_string(j))
          wrong++;
      }
      storeBarrier(*client, "barrier", kClients, kTimeout);
      if (client->add("arrived", 0) != kClients) wrong++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(server->add("arrived", 0), kClients);
}

TEST(TcpStoreTest, ServerSurvivesClientsDisconnecting) {
  auto server = TcpStore::create(kHost, 0, true, kTimeout);
  {
    auto client = TcpStore::create(kHost, server->port(), false, kTimeout);
    setString(*client, "first", "1");
  }
  // A client that dies halfway through a request, and one that sends garbage.
  const int half = rawConnect(server->port());
  const uint8_t partial[6] = {100, 0, 0, 0, 1, 0};
  EXPECT_EQ(::send(half, partial, sizeof(partial), 0), 6);
  ::close(half);
  const int garbage = rawConnect(server->port());
  const uint8_t junk[8] = {0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4};
  EXPECT_EQ(::send(garbage, junk, sizeof(junk), 0), 8);
  ::close(garbage);
  auto client = TcpStore::create(kHost, server->port(), false, kTimeout);
  EXPECT_EQ(getString(*client, "first", kTimeout), "1");
  EXPECT_EQ(client->add("n", 1), 1);
}

TEST(TcpStoreTest, ConnectFailureNamesHostAndPort) {
  uint16_t port = 0;
  {
    // Bind and close to find a port nobody listens on.
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
    ::close(fd);
  }
  const auto start = Clock::now();
  try {
    TcpStore::create(kHost, port, false, milliseconds(300));
    FAIL() << "connected to a port nobody listens on";
  } catch (const StoreError& e) {
    const std::string expected = std::string(kHost) + ":" + std::to_string(port);
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  // It retries for its 300 ms, then gives up: within ten times that.
  EXPECT_LT(elapsedSince(start).count(), 3000);
}

TEST(TcpStoreTest, ClientConnectsToAServerStartedLater) {
  // Find a free port, then start the server on it after the client began retrying.
  uint16_t port = 0;
  {
    auto probe = TcpStore::create(kHost, 0, true, kTimeout);
    port = probe->port();
  }
  std::shared_ptr<TcpStore> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(milliseconds(150));
    server = TcpStore::create(kHost, port, true, kTimeout);
  });
  auto client = TcpStore::create(kHost, port, false, kTimeout);
  starter.join();
  setString(*client, "x", "y");
  EXPECT_EQ(getString(*server, "x", kTimeout), "y");
}

}  // namespace
}  // namespace strata::bootstrap
