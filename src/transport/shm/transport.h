// The shared-memory transport: the point-to-point links of one group among the ranks of this
// host, and their progress thread (`strata-shmlink`).
//
// connect() is collective over the local ranks (TransportOptions::localPeers, the
// collectives' ShmDomain): it creates one shared region (region.h) for the group's links,
// whose local rank r's part holds
//
//   [bell page: doorbell word, sleeper count]
//   [ring from local peer 0: control page (head, tail, close word + reason) | ringBytes]
//   [ring from local peer 1 ...]                         one ring per local peer
//
// so each rank reads its inbound rings from its own part and writes its outbound ones into
// the peers' parts (connection.h moves the bytes). The peers are found through the local
// ranks, not the store: the region takes its name and barrier from them.
//
// Threading: connect() once, from one thread; kick() from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "transport/shm/connection.h"
#include "transport/transport.h"

namespace strata::transport::shm {

class LocalPeers;

class ShmTransport final : public Transport {
 public:
  // `ringBytes` from p2pRingBytes; `yield`: how long a wait keeps the core after its spin
  // before it sleeps (p2pYieldUs).
  ShmTransport(LocalPeers& localPeers, size_t ringBytes, std::chrono::microseconds yield);
  ~ShmTransport() override;
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  std::string_view name() const override { return "shm"; }
  // `peers` must be every other local rank, and the local ranks in ascending group rank must
  // be local ranks 0..localSize-1 (buildTopology's order). `store` is not used. Throws Error
  // when `peers` are not this host's other ranks or on a second call.
  std::vector<std::unique_ptr<Connection>> connect(bootstrap::Store& store, const PeerInfo& self,
                                                   const std::vector<PeerInfo>& peers) override;

  size_t ringBytes() const { return ringBytes_; }
  // An op could not finish at once: make sure the progress thread runs.
  void kick();

 private:
  void run();

  LocalPeers& localPeers_;
  const size_t ringBytes_;
  const std::chrono::microseconds yield_;
  std::shared_ptr<Region> region_;
  std::vector<std::shared_ptr<ConnectionCore>> cores_;  // by local index; null for self
  ConnectionCore::Bell* myBell_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  bool kicked_ = false;  // guarded by mu_
  bool stop_ = false;    // guarded by mu_
  std::thread thread_;   // started at the first kick
};

}  // namespace strata::transport::shm
