// The TCP transport's one I/O progress thread ("strata-tcp-io"): an edge-triggered epoll
// loop over the sockets of all the transport's connections. On every readiness edge it
// advances that connection's queued sends and receives until the socket would block, so
// a rank's send to its right neighbour and receive from its left both move while the
// rank's own thread sleeps in PendingOp::wait().
//
// Thread-safety: every method is thread-safe. Connections are registered by id, and an
// event is dispatched only after looking the id up under mu_, so an event that races with
// remove() is dropped rather than dereferenced. The thread never lets an exception
// escape: if the loop itself fails, every registered connection is failed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "transport/tcp/socket.h"

namespace strata::transport::tcp {

class ConnectionCore;

class IoLoop {
 public:
  // Starts the thread; its log lines carry the tag of `rank` in a world of `worldSize`.
  // Throws NetworkError when epoll or eventfd cannot be created.
  IoLoop(int rank, int worldSize);
  ~IoLoop();  // stop()
  IoLoop(const IoLoop&) = delete;
  IoLoop& operator=(const IoLoop&) = delete;

  // A fresh connection id (never 0, which names the wakeup eventfd).
  uint64_t nextId() { return nextId_.fetch_add(1); }
  // Registers core's socket for progress. Throws NetworkError if epoll refuses it.
  void add(const std::shared_ptr<ConnectionCore>& core);
  // Unregisters; a no-op for an unknown id. The caller closes the core afterwards.
  void remove(uint64_t id);
  // Stops and joins the thread, then closes every connection still registered, failing
  // their pending and future ops. Idempotent; never throws.
  void stop();

 private:
  void run(int rank, int worldSize);
  void loop();
  void closeAll(const std::string& why);

  static constexpr uint64_t kWakeId = 0;
  Fd epollFd_;
  Fd wakeFd_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> nextId_{1};
  std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<ConnectionCore>> cores_;  // guarded by mu_
  bool stopped_ = false;                                                 // guarded by mu_
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace strata::transport::tcp
