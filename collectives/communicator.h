// A group of ranks and everything needed to run collectives among them: the topology
// (which ranks share a host), a shared-memory domain for the ranks of this host, one TCP
// connection per peer, the point-to-point links (which transports: transport_plan.h),
// sequence numbers, and the algorithm choice of the cost model.
//
// Threading: one caller thread at a time (Group serialises calls onto it); the TCP
// transport owns its own I/O thread. After any failure the communicator is *failed*:
// every later call throws at once, since the transport is in an unknown state.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/store.h"
#include "collectives/cost_model.h"
#include "collectives/flight_recorder.h"
#include "collectives/shard_plan.h"
#include "collectives/shared_buffers.h"
#include "collectives/signature.h"
#include "collectives/topology.h"
#include "collectives/tcp_algorithms.h"
#include "strata/types.h"
#include "transport/registry.h"
#include "transport/transport.h"

namespace strata::collectives {

class ShmDomain;
struct FlightP2pShared;  // communicator_flight.cpp

struct CommOptions {
  std::chrono::milliseconds timeout{300000};
  std::string transport = "auto";      // auto | shm | tcp (tcp: no shared memory at all)
  std::string allreduceAlgo = "auto";  // see cost_model.h
  size_t shmSlotBytes = 1 << 20;
  int shmSpinsBeforeYield = -1;  // -1: from the domain's cores (ShmDomain::spinsForCores)
  size_t chunkBytes = 0;  // 0: defaultChunkBytes() for this host's ranks and cores
  size_t directBlockBytes = 0;  // cache blocking of shm_direct; 0: defaultDirectBlockBytes()
  std::string jobSecret;               // every TCP connection proves it (transport/tcp/handshake.h)
  bool encryptInterHost = false;       // TLS between ranks of different hosts, keyed by jobSecret
  std::string advertiseHost;           // address peers use to reach this rank's TCP listener
  std::string bindHost;                // address the TCP listener binds; empty: all interfaces
  bool connectTcp = true;              // false: shared memory only (single host)
  // Point-to-point links (transport_plan.h): "auto" (shared memory to ranks of this host,
  // TCP to the others) or "tcp" (TCP to every peer); STRATA_P2P_TRANSPORT.
  std::string p2pTransport = "auto";
  // The shared-memory links' rings (transport/shm/ring_plan.h):
  size_t p2pRingBytes = 0;  // 0: p2pRingBytes() for this host's ranks (STRATA_P2P_RING_BYTES)
  int64_t p2pYieldUs = -1;  // -1: p2pYieldUs() for this host's ranks and cores (STRATA_P2P_YIELD_US)
  // The flight recorder (null: nothing is recorded) and how the group appears in it: a
  // name equal on every member and the members' world ranks (empty: 0..size-1).
  std::shared_ptr<flight::Recorder> flight;
  std::string groupName = "world";
  std::vector<int> worldRanks;
};

// The flight recorder's operation for a collective kind.
inline flight::Op flightOpOf(CollKind kind) {
  switch (kind) {
    case CollKind::kAllocateShared:
      return flight::Op::kAllocateShared;
    case CollKind::kReduceScatterShared:
      return flight::Op::kReduceScatterShared;
    default:
      return static_cast<flight::Op>(kind);  // same values (static_assert in communicator_flight.cpp)
  }
}

class Communicator {
 public:
  // Collective over all members. `peers[r]` describes group rank r; `store` must be
  // private to this group (a PrefixStore). Throws on rendezvous failure or bad options.
  static std::unique_ptr<Communicator> create(std::shared_ptr<bootstrap::Store> store, int rank,
                                              std::vector<transport::PeerInfo> peers,
                                              const CommOptions& opts);
  ~Communicator();

  int rank() const { return topo_.rank; }
  int size() const { return topo_.worldSize; }
  const GroupTopology& topology() const { return topo_; }
  const CommOptions& options() const { return opts_; }
  // The algorithm the last allReduce used (tests, benchmarks, logs).
  AllReduceAlgo lastAllReduceAlgo() const { return lastAlgo_; }
  // How many of the rank's threads wait for this communicator's collectives (the executor
  // counts them, strata::Group): while none does, shared-memory waits sleep instead of
  // spinning, leaving the core to the compute thread. Set once, before any collective.
  void setCallersWaiting(std::shared_ptr<const std::atomic<int>> callersWaiting);
  uint64_t sequenceNumber() const { return seq_; }
  // Whether a collective failed (the group is unusable).
  bool failed() const { return failed_.load(); }
  // Whether it failed because a peer died or a link broke (not a mismatch or a time-out):
  // then some rank may never reach a job-wide barrier again (see strata::finalize).
  // A point-to-point wait that ended in a NetworkError counts too.
  bool lostPeer() const { return (failed_.load() && lostPeer_) || p2pPeerLost_->load(); }

  // `enqueued`: the flight record made when the call was queued (flightEnqueued), which
  // the call takes over when it runs; none for a call made at once.
  //
  // `ownPieces` (allReduce in place, reduceScatterShared): elements of this rank's input,
  // inside sharedShardOf(count, size, rank, dtype), that are read from elsewhere
  // (InputPiece, shard_plan.h). The zero-copy algorithms read them there; any other
  // algorithm first copies them into `in`, which must then be writable memory.
  void allReduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                 flight::Ticket enqueued = {}, const std::vector<InputPiece>& ownPieces = {});
  void broadcast(void* data, size_t count, DType dtype, int root, flight::Ticket enqueued = {});
  void allGather(const void* in, void* out, size_t countPerRank, DType dtype, flight::Ticket enqueued = {});
  void reduceScatter(const void* in, void* out, size_t countPerRank, DType dtype, ReduceOp op,
                     flight::Ticket enqueued = {});
  void barrier();
  // Group::reduceScatterShared (strata/group.h, shm_direct.h): this rank's shard,
  // sharedShardOf(count, size(), rank(), dtype), of `out` receives the reduction of every
  // rank's `in` (inside a shared buffer, same offset on every rank); zero-copy on one host,
  // else an AllReduce into all of `out`. Returns once every rank's shard is written.
  void reduceScatterShared(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                           flight::Ticket enqueued = {}, const std::vector<InputPiece>& ownPieces = {});

  // Collective: a buffer of `numBytes` per rank that every rank of this host maps
  // (shared_buffers.h); an in-place allReduce of data inside it takes the zero-copy
  // algorithms. Every rank must pass the same size: otherwise every rank throws
  // MismatchError naming the sizes, and the group stays usable. Without local peers the
  // buffer is private memory. The id is the allocation's sequence number (equal on all ranks).
  std::shared_ptr<SharedRegion> allocateShared(size_t numBytes);

  // Records a collective queued to run later (sequence number not yet known). Thread-safe.
  flight::Ticket flightEnqueued(CollKind kind, size_t count, DType dtype, ReduceOp op, int root);

  // Tagged point-to-point over the link to `peer` (ordered per peer pair): the kind
  // p2pLink(peer) names (shared memory to a rank of this host, TCP to another host). Each is
  // a flight record, completed or failed when the returned op's wait() ends.
  std::unique_ptr<transport::PendingOp> postSend(const void* data, size_t numBytes, int peer, uint64_t tag);
  std::unique_ptr<transport::PendingOp> postRecv(void* data, size_t numBytes, int peer, uint64_t tag);

  // Which kind of link carries point-to-point messages to group rank `peer` (kNone for self).
  transport::Kind p2pLink(int peer) const {
    return peer >= 0 && peer < static_cast<int>(p2pLinks_.size()) ? p2pLinks_[peer] : transport::Kind::kNone;
  }

  // Benchmarks: the link of one kind to `peer` whatever p2pLink chose (null when the group
  // has none: no TCP mesh, or `peer` not on this host for kShm).
  transport::Connection* TEST_p2pConnection(int peer, transport::Kind kind) { return link(kind, peer); }

  // The TCP connection to group rank `peer`; null for self or without TCP (tests, logs).
  const transport::Connection* connection(int peer) const {
    return link(transport::Kind::kTcp, peer);
  }

  // Marks the communicator failed (also for the peers on this host).
  void abort(const std::string& reason);

  // Tests and benchmarks: force an AllReduce algorithm ("auto" restores the cost model).
  // Every rank must set the same value between the same collectives.
  void TEST_setAllReduceAlgo(const std::string& algo) { opts_.allreduceAlgo = algo; }
  // Benchmarks: recording on (into options().flight) or off; between operations only.
  void TEST_enableFlightRecorder(bool on) { flight_ = on ? opts_.flight.get() : nullptr; }
  bool flightRecorderEnabled() const { return flight_ != nullptr; }

 private:
  Communicator(GroupTopology topo, const CommOptions& opts);
  CollSignature nextSignature(CollKind kind, size_t count, DType dtype, ReduceOp op, int root);
  template <typename Fn>
  void guarded(const CollSignature& sig, flight::Ticket enqueued, Fn&& fn);
  flight::Ticket flightBegin(const CollSignature& sig, flight::Ticket enqueued);
  // Flight recording of point-to-point ops and failures (communicator_flight.cpp).
  void joinFlightRecorder();
  flight::Ticket flightP2p(flight::Op kind, size_t numBytes, int peer, uint64_t tag);
  // What every send/recv checks before it is posted (a valid peer, TCP connections, a group
  // that has not failed; throws naming the peer), then its flight recorder ticket.
  flight::Ticket startP2p(flight::Op kind, size_t numBytes, int peer, uint64_t tag);
  // The posted op, recorded when the ticket is live (id != 0), as it is otherwise.
  std::unique_ptr<transport::PendingOp> wrapP2p(std::unique_ptr<transport::PendingOp> op, flight::Ticket ticket,
                                                flight::Op kind, size_t numBytes, int peer, uint64_t tag);
  void reportFlightFailure(const std::string& trigger, const std::string& op, const std::string& message);
  void allGatherWith(const CollSignature& sig, const void* in, void* out, size_t countPerRank, DType dtype);
  // The cost model's (or the forced) algorithm for this call, then runAllReduce.
  void chooseAndRunAllReduce(const CollSignature& sig, const SharedPlace& place, Placement placement, const void* in,
                             void* out, const std::vector<InputPiece>& ownPieces = {});
  void runAllReduce(AllReduceAlgo algo, const CollSignature& sig, const SharedPlace& place, const void* in,
                    void* out, const std::vector<InputPiece>& ownPieces);
  // After a failure: tell the peers (store record, shm abort, closed connections) and
  // rethrow, as the first failing rank's error when another rank failed first.
  [[noreturn]] void failAndRethrow(const CollSignature& sig, std::exception_ptr error);
  void closeConnections(const std::string& why, transport::CloseReason reason);
  // Makes `kind`'s transport (its registered factory) and connects it to group ranks
  // `ranks` (collective over them).
  void connect(transport::Kind kind, const std::vector<transport::PeerInfo>& peers, const std::vector<int>& ranks);
  transport::TransportOptions transportOptions() const;
  // The connection of `kind` to `peer`; null for self and unconnected peers.
  transport::Connection* link(transport::Kind kind, int peer) const {
    const auto& conns = links_[transport::kindIndex(kind)];
    return peer >= 0 && peer < static_cast<int>(conns.size()) ? conns[peer].get() : nullptr;
  }
  // The TCP mesh (every other rank), which the TCP collectives run on; empty without one.
  std::vector<std::unique_ptr<transport::Connection>>& tcpLinks() {
    return links_[transport::kindIndex(transport::Kind::kTcp)];
  }
  bool useShmOnly() const;
  TopologySummary summary() const;
  LinkSet allLinks();

  GroupTopology topo_;
  CommOptions opts_;
  std::shared_ptr<bootstrap::Store> store_;  // this group's namespace: failure records
  std::unique_ptr<ShmDomain> shm_;  // before the shared-memory transport, which uses it
  // By kind (transport::kindIndex): the transports made, then their connections by group
  // rank (null for self and for peers the kind does not connect). The connections go first.
  std::array<std::unique_ptr<transport::Transport>, transport::kNumKinds> transports_;
  std::array<std::vector<std::unique_ptr<transport::Connection>>, transport::kNumKinds> links_;
  std::vector<transport::Kind> p2pLinks_;  // by group rank
  LinkSet crossLinks_;
  uint64_t seq_ = 0;
  std::atomic<bool> failed_{false};
  std::string failure_;  // written before failed_ is set
  bool lostPeer_ = false;  // likewise
  AllReduceAlgo lastAlgo_ = AllReduceAlgo::kTcpRing;
  bool warnedForcedAlgo_ = false;
  Scratch scratch_, packed_;
  Scratch staging_;                     // reduceScatterShared's private result when local peers may share `out`
  flight::Recorder* flight_ = nullptr;  // opts_.flight, unless a benchmark turned it off
  uint32_t flightGroup_ = 0;
  // The recorder lane of this group's collectives (issued one at a time, as seq_ assumes):
  // no atomic to claim a slot. 0: the shared lane (every lane taken).
  uint32_t flightLane_ = 0;
  std::shared_ptr<FlightP2pShared> flightP2p_;  // shared with the recorded ops, which may outlive us
  // Set by a point-to-point op whose wait failed with a NetworkError (shared with the ops,
  // which may outlive us).
  std::shared_ptr<std::atomic<bool>> p2pPeerLost_ = std::make_shared<std::atomic<bool>>(false);
  SharedRegistry shared_;
};

}  // namespace strata::collectives
