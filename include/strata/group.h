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
}

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

  // Asynchronous forms: the buffers must stay valid until the Work completes.
  std::shared_ptr<Work> allreduceAsync(const void* in, void* out, size_t count, DType dtype,
                                       ReduceOp op = ReduceOp::kSum);
  std::shared_ptr<Work> broadcastAsync(void* data, size_t count, DType dtype, int root);
  std::shared_ptr<Work> allgatherAsync(const void* in, void* out, size_t countPerRank, DType dtype);
  std::shared_ptr<Work> reduceScatterAsync(const void* in, void* out, size_t countPerRank, DType dtype,
                                           ReduceOp op = ReduceOp::kSum);

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
