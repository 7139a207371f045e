// Group: a set of ranks and the collectives among them, on raw buffers (torch-free).
// The tensor forms (strata/tensor_ops.h) call these.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/types.h"
#include "strata/work.h"

namespace strata {

namespace collectives {
class Communicator;
class SharedRegion;
}

// Memory for data a group reduces again and again (gradient buckets), from
// Group::allocateShared: every rank of the group on this host maps every local peer's
// buffer of the same allocation, so an in-place allreduce of data inside it reduces
// straight out of the peers' buffers, without staging copies ("zero-copy"; see
// docs/collectives.md). The buffer is zeroed and page aligned.
//
// Releasing it is local and never blocks (safe in destructors and error paths); the
// memory returns to the system once every local rank has released it. A collective that
// is running on it keeps it alive until it ends.
class SharedBuffer {
 public:
  explicit SharedBuffer(std::shared_ptr<collectives::SharedRegion> region);
  ~SharedBuffer();
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;

  void* data() const;   // this rank's buffer
  size_t size() const;  // bytes
  // Equal on every rank of the group (the allocation's sequence number in the group).
  uint64_t id() const;
  // False when this rank has no peer on its host to share with (one rank per host, or
  // STRATA_TRANSPORT=tcp): then it is ordinary memory and collectives stage as usual.
  bool peerMapped() const;
  // Every local rank's copy: part(localRank()) == data(). A peer's copy is readable and
  // writable here (when peerMapped()); part(0) serves as one copy shared by the host's ranks
  // (host-shared parameters, docs/collectives.md).
  void* part(int localRank) const;
  int localRank() const;
  int localSize() const;

 private:
  std::shared_ptr<collectives::SharedRegion> region_;
};

// Thread-safety: collectives may be called from any thread, but every rank of the group
// must issue the same collectives in the same order. Blocking calls run on the calling
// thread when nothing is queued; asynchronous ones run in order on the group's
// communication thread ("strata-comm"). Point-to-point calls may run concurrently
// with collectives.
class Group {
 public:
  explicit Group(std::unique_ptr<collectives::Communicator> comm);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const;
  int size() const;

  // All collectives: `count` is in elements; in == out is in place. Throw
  // strata::MismatchError when ranks called different collectives, NetworkError /
  // TimeoutError on a dead or stuck peer (naming it), Error on misuse.
  void allreduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op = ReduceOp::kSum);
  void broadcast(void* data, size_t count, DType dtype, int root);
  // out receives size() blocks of countPerRank elements, in rank order.
  void allgather(const void* in, void* out, size_t countPerRank, DType dtype);
  // in holds size() blocks of countPerRank elements; out receives this rank's reduced block.
  void reduceScatter(const void* in, void* out, size_t countPerRank, DType dtype, ReduceOp op = ReduceOp::kSum);
  void barrier();

  // Collective: a SharedBuffer of `numBytes` on every rank. Every rank must ask for the
  // same size; otherwise every rank throws strata::MismatchError naming both sizes (the
  // group stays usable). An allreduce with in == out inside the buffer uses the zero-copy
  // path when the buffer is peer-mapped; then every rank must pass the same offset in its
  // buffer (else MismatchError).
  std::shared_ptr<SharedBuffer> allocateShared(size_t numBytes);

  // Reduce-scatter out of shared memory (a sharded optimizer's gradient reduction). `in`:
  // `count` elements inside a SharedBuffer of this group, at the same offset on every rank.
  // Afterwards this rank's shard of `out`, sharedShard(count, dtype), holds the reduction
  // over every rank's `in` (same operand order on every rank, so bitwise reproducible).
  // `out` may be `in` or any memory, e.g. part(0) of another SharedBuffer, which the ranks
  // then fill together, each its own shard. When the group is on one host and `in` is
  // peer-mapped, nothing else of `out` is written (the zero-copy reduction without its
  // push: read n, write 1 per element of the shard); otherwise (one rank per host, several
  // hosts, ordinary memory) it is an AllReduce from `in` into all of `out`. Returns once
  // every rank's shard is written: all of `out` is complete when any rank returns.
  void reduceScatterShared(const void* in, void* out, size_t count, DType dtype, ReduceOp op = ReduceOp::kSum);
  // This rank's shard of `count` elements in reduceScatterShared: the zero-copy AllReduce's
  // shards (cache-line aligned, by group rank; trailing ones may be empty). Pure.
  struct ShardRange {
    size_t offset = 0;  // elements
    size_t count = 0;
  };
  ShardRange sharedShard(size_t count, DType dtype) const;

  // Asynchronous forms: the buffers must stay valid until the Work completes.
  std::shared_ptr<Work> allreduceAsync(const void* in, void* out, size_t count, DType dtype,
                                       ReduceOp op = ReduceOp::kSum);
  std::shared_ptr<Work> broadcastAsync(void* data, size_t count, DType dtype, int root);
  std::shared_ptr<Work> allgatherAsync(const void* in, void* out, size_t countPerRank, DType dtype);
  std::shared_ptr<Work> reduceScatterAsync(const void* in, void* out, size_t countPerRank, DType dtype,
                                           ReduceOp op = ReduceOp::kSum);
  std::shared_ptr<Work> reduceScatterSharedAsync(const void* in, void* out, size_t count, DType dtype,
                                                 ReduceOp op = ReduceOp::kSum);

  // In-place forms whose input is partly elsewhere (a data-parallel gradient that autograd
  // produced and nobody copied into its bucket yet): this rank's elements
  // [offset, offset + count) of `data` / `in` are read from `piece.data`, which must stay
  // valid until the Work completes; pieces must not overlap. On the zero-copy paths this
  // rank reads the elements inside its own shard (sharedShard) straight from the pieces,
  // which saves copying them in (read 1, write 1 per element); everything else, and every
  // element on the other paths, is first copied into `data` / `in` (which must be writable).
  // The result is the same as after copying the pieces in and calling the plain form.
  struct InputPiece {
    size_t offset = 0;  // elements
    size_t count = 0;
    const void* data = nullptr;
  };
  // Where an asynchronous form runs. kHereIfIdle: on the calling thread, before the call
  // returns, when nothing of this group is queued or running; the Work returned is then
  // complete (an error is kept for wait(), as from the communication thread). For a caller
  // that would wait for it at once (the last gradient bucket of a backward): it saves handing
  // the operation to the communication thread and back, two wakeups and, where the two
  // threads share a core, two context switches. Otherwise it is queued as kQueue.
  enum class Launch { kQueue, kHereIfIdle };
  std::shared_ptr<Work> allreduceAsync(void* data, size_t count, DType dtype, ReduceOp op,
                                       std::vector<InputPiece> ownPieces, Launch launch = Launch::kQueue);
  std::shared_ptr<Work> reduceScatterSharedAsync(void* in, void* out, size_t count, DType dtype, ReduceOp op,
                                                 std::vector<InputPiece> ownPieces, Launch launch = Launch::kQueue);

  // Tagged point-to-point. Messages between two ranks arrive in order; a receive whose
  // tag or size differs from the next message fails with MismatchError.
  void send(const void* data, size_t numBytes, int dst, uint64_t tag = 0);
  void recv(void* data, size_t numBytes, int src, uint64_t tag = 0);
  std::shared_ptr<Work> isend(const void* data, size_t numBytes, int dst, uint64_t tag = 0);
  std::shared_ptr<Work> irecv(void* data, size_t numBytes, int src, uint64_t tag = 0);

  // "ranks=4 hosts=2 local_ranks=[0,1] ..." and the algorithm of the last allreduce.
  std::string describe() const;
  std::string lastAllreduceAlgorithm() const;
  std::chrono::milliseconds timeout() const;

  // The internal communicator (tests and benchmarks).
  collectives::Communicator& communicator();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata
