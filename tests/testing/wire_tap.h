// WireTap: a TCP relay on 127.0.0.1 that records every byte in both directions, to check
// what a client and a server really put on the wire (for example, that a secret never
// appears). Point the client at port(); each accepted connection is relayed to target().
//
// Threading: one relay thread, stopped and joined by the destructor; the accessors are
// thread-safe. Meant for handshakes and small requests (writes are blocking).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace strata::testing {

class WireTap {
 public:
  // `target` is asked (on the relay thread) where to connect each time a client arrives.
  explicit WireTap(std::function<std::pair<std::string, uint16_t>()> target);
  ~WireTap();
  WireTap(const WireTap&) = delete;
  WireTap& operator=(const WireTap&) = delete;

  uint16_t port() const { return port_; }
  // Every byte clients sent (and servers sent back), over all connections so far.
  std::string clientToServer() const;
  std::string serverToClient() const;
  int connections() const;

 private:
  void run();

  std::function<std::pair<std::string, uint16_t>()> target_;
  int listenFd_ = -1;
  int stopFd_ = -1;
  uint16_t port_ = 0;
  mutable std::mutex mu_;
  std::string up_, down_;  // guarded by mu_
  int connections_ = 0;    // guarded by mu_
  std::thread thread_;
};

}  // namespace strata::testing
