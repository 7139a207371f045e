// The TcpStore server: one listener thread ("strata-store") serving every rank's client.
// A new client first passes the authentication step (store_auth.h); only then are its
// requests (tcp_store_protocol.h) served. A client that fails it is refused, logged with
// its address and claimed rank, and closed; one that stays silent is dropped after
// kAuthTimeout. A get of a missing key parks in a waiter list; the server keeps serving
// other clients and answers the waiter when the key is set or its wait expires.
//
// Threading: the constructor and destructor run on the owner's thread; all other state is
// touched only by the listener thread, so it needs no lock.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/store.h"
#include "bootstrap/store_auth.h"
#include "bootstrap/tcp_store_protocol.h"

namespace strata::bootstrap::detail {

class StoreServer {
 public:
  // Listens on bindHost:port (port 0: any free one). bindHost "0.0.0.0", "::" or "*":
  // every interface; else its addresses (a name resolving to several: the first that
  // binds). Throws StoreError naming the address and the errno text.
  StoreServer(const std::string& bindHost, uint16_t port, const std::string& secret);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  uint16_t port() const { return port_; }
  // The address it listens on, as "host:port" ("0.0.0.0:p" for every interface).
  const std::string& listenAddress() const { return listenAddress_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Client {
    Bytes in;   // bytes received, not yet parsed
    Bytes out;  // reply bytes not yet sent
    size_t outSent = 0;
    bool waiting = false;    // a get is parked; later requests wait behind it
    bool authed = false;     // passed the authentication step
    bool closing = false;    // refused: drop once `out` is sent
    auth::Nonce nonce{};     // our challenge
    Clock::time_point authDeadline;
    std::string address;     // the peer's host:port, for logs
  };
  struct Waiter {
    int fd;
    std::string key;
    Clock::time_point deadline;
  };

  void run();
  void serveOnce();
  int pollTimeoutMs() const;
  void acceptClients();
  void serveClient(int fd, short revents);
  bool readClient(int fd, Client& client);
  bool authenticate(Client& client);
  bool handleRequests(int fd, Client& client);
  void handle(int fd, Client& client, Command command, const std::string& key, const uint8_t* arg,
              size_t argBytes);
  static void reply(Client& client, Status status, const uint8_t* payload, size_t numBytes);
  static bool flush(int fd, Client& client);
  void wakeWaiters(const std::string& key);
  void expireWaiters();
  void expireUnauthenticated();
  template <typename Pred>
  void finishWaiters(Pred matches, Status status);
  void dropClient(int fd);

  const auth::Key key_;
  int listenFd_ = -1;
  int wakeFd_ = -1;
  uint16_t port_ = 0;
  std::string listenAddress_;
  std::atomic<bool> stop_{false};
  std::map<int, Client> clients_;
  std::vector<Waiter> waiters_;
  std::map<std::string, Bytes> data_;
  std::thread thread_;  // last: starts after every member above is initialised
};

}  // namespace strata::bootstrap::detail
