// Point-to-point transports: ordered, reliable, tagged byte channels to peers.
//
// One folder per kind, with the same file names where the roles match (gloo's layout):
//   tcp/  transport.cpp (the Transport: listen, dial, handshake), connection.{h,cpp},
//         io_loop, handshake, tls, socket.h
//   shm/  transport.{h,cpp} (the Transport: the group's region of rings), connection.{h,cpp},
//         region, doorbell, ring_plan
//   nccl/ not a Transport: a communicator over device memory (nccl.h).
// A Transport creates one Connection per peer; registry.h says which kind reaches which
// peer and which one a group prefers. The shared-memory collectives do not use this
// interface (they read peers' buffers directly, see collectives/shm_domain.h);
// Connections carry the TCP collectives, the inter-host phase of the hierarchical
// AllReduce and the pipeline's tagged send/recv.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/store.h"

namespace strata::transport {

namespace shm {
class LocalPeers;
}

// What a rank tells its peers about itself at rendezvous.
struct PeerInfo {
  int rank = 0;
  std::string host;    // hostname (or the pretend host of STRATA_HOSTS)
  int hostIndex = 0;   // index of `host` among the job's hosts
  pid_t pid = 0;       // used to detect a dead local peer quickly
};

// A posted send or receive. The buffer must stay valid until wait() returns or throws.
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  // Blocks until complete. Throws NetworkError on peer failure (naming the peer),
  // TimeoutError after `timeout`, MismatchError when the peer's message has another
  // tag or byte count than this receive expects.
  virtual void wait(std::chrono::milliseconds timeout) = 0;
  // Non-blocking completion check; never throws (errors surface in wait()).
  virtual bool done() = 0;
};

// What kind of failure made a rank close a connection; the peer rethrows an error of the
// matching type (NetworkError, TimeoutError, MismatchError), with the reason text.
enum class CloseReason : uint8_t { kNetwork = 0, kTimeout = 1, kMismatch = 2 };

// Ordered, reliable byte channel to one peer. Messages are matched in order: the n-th
// receive posted gets the n-th message the peer sent. Thread-safe: a send and a receive
// may be posted from different threads (the pipeline's send and recv threads).
class Connection {
 public:
  virtual ~Connection() = default;
  virtual int peer() const = 0;
  virtual std::unique_ptr<PendingOp> postSend(const void* data, size_t numBytes, uint64_t tag) = 0;
  virtual std::unique_ptr<PendingOp> postRecv(void* data, size_t numBytes, uint64_t tag) = 0;
  // Fails every pending and later op and shuts the channel down, so the peer fails
  // promptly too; when no message is half-sent, the peer is first told `why` (its
  // pending and later ops fail with that reason). Idempotent, thread-safe, never throws.
  virtual void close(const std::string& why, CloseReason reason = CloseReason::kNetwork) = 0;
  // Whether the bytes travel encrypted (a TLS session was negotiated at connect).
  virtual bool encrypted() const { return false; }
};

struct TransportOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  std::string bindHost;    // address to listen on; empty: all interfaces
  std::string advertiseHost;  // address peers connect to; empty: the hostname's address
  // Every connection proves it on both ends (tcp/handshake.h); it never crosses the wire.
  // "" is a valid but public secret (an unauthenticated job).
  std::string jobSecret;
  // TLS (keyed by jobSecret, tcp/tls.h) on connections between ranks of different hosts
  // (PeerInfo::host); ranks of one host talk plain.
  bool encryptInterHost = false;
  // Shared memory (shm/transport.h): the ranks of this host the links join (they lend the
  // region its name and barrier, and must outlive the transport), the bytes of each ring
  // and how long a wait keeps its core before it sleeps (shm/ring_plan.h).
  shm::LocalPeers* localPeers = nullptr;
  size_t ringBytes = 0;
  std::chrono::microseconds yield{0};
};

// Creates connections of one kind (registry.h). TCP's is thread-safe; shared memory's
// connects once (shm/transport.h).
class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;
  // Connects to each of `peers` (ranks other than self), meeting them through `store` (TCP
  // publishes its address there and reads the peers') or the kind's own rendezvous (shared
  // memory: its LocalPeers). Returns connections indexed like `peers`. Collective over self
  // and all peers. Throws StoreError / TimeoutError naming the missing peer.
  virtual std::vector<std::unique_ptr<Connection>> connect(bootstrap::Store& store,
                                                           const PeerInfo& self,
                                                           const std::vector<PeerInfo>& peers) = 0;
};

// The kinds' factories (registry.h registers them).
std::unique_ptr<Transport> makeTcpTransport(const TransportOptions& opts);
// Throws Error without opts.localPeers.
std::unique_ptr<Transport> makeShmTransport(const TransportOptions& opts);

}  // namespace strata::transport
