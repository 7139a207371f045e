// The NCCL transport: one NCCL communicator per group, bootstrapped through our Store,
// running every collective on a dedicated CUDA stream.
//
// Unlike shm/ and tcp/, it does not implement Transport/Connection (transport.h) and is not
// in the registry (registry.h): NCCL runs whole collectives over device memory on a CUDA
// stream, where a Connection moves host bytes to one peer, so it is a communicator beside
// collectives::Communicator, chosen by its own pure rules (nccl_select.h).
//
// Two implementations, exactly one compiled (CMake): nccl_comm.cpp when CUDA and NCCL
// are found, no_nccl.cpp otherwise (isCompiled() false, create() throws BackendError).
// This header includes no CUDA or NCCL header, so every module can include it; CUDA
// streams appear as `void*` (a cudaStream_t). Include it as "transport/nccl/nccl.h":
// the system header is <nccl.h>, and a quoted "nccl.h" from this folder means this file.
//
// Pure parts (backend selection, device assignment, dtype/op mapping, the unique-id
// exchange) are in nccl_select.h.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>

#include "bootstrap/store.h"
#include "strata/types.h"
#include "transport/nccl/nccl_select.h"

namespace strata::nccl {

// Whether this build has the NCCL transport (STRATA_HAVE_NCCL). Never throws.
bool isCompiled();

// CUDA devices visible to this process; 0 without NCCL, without a driver ("CUDA driver
// version is insufficient" means no GPU, not an error) or without a device. Any other
// CUDA error is logged once at WARN and also counts as 0. Cached after the first call;
// thread-safe; never throws.
int deviceCount();

// isCompiled() && deviceCount() > 0. Thread-safe; never throws.
bool isAvailable();

// One rank's NCCL communicator and its CUDA stream.
//
// Threading: one caller thread at a time (NCCL calls happen only on the thread that
// owns the communicator). Buffers are device pointers on device(); they must stay
// valid until synchronize() returns.
//
// Ordering: each collective is enqueued on the communicator's own stream (created
// cudaStreamNonBlocking), after the work already queued on the legacy default stream.
// Work on any other producer stream needs waitFor(stream) first. Enqueueing returns
// at once; synchronize(timeout) waits for completion.
//
// Failure: any NCCL/CUDA error throws BackendError (rank tag, the call, NCCL's or
// CUDA's message). After a failure, a timeout or abort(), the communicator is aborted
// and every later call throws BackendError at once; build a new one.
class NcclComm {
 public:
  // Collective over all worldSize ranks. Rank 0 creates the NCCL unique id and
  // publishes it in `store` under kUniqueIdKey (use a PrefixStore per communicator);
  // the others fetch it. Then cudaSetDevice(device) (left current on the calling
  // thread: one process or thread per GPU) and NCCL initialisation, bounded by
  // `timeout` as a whole. `timeout` is also the bound for NCCL's internal progress
  // (lazy connection set-up) during later calls. Throws Error on bad arguments,
  // TimeoutError (after aborting) when a peer does not arrive in time, BackendError
  // on NCCL/CUDA failure or when built without NCCL.
  static std::unique_ptr<NcclComm> create(bootstrap::Store& store, int rank, int worldSize,
                                          int device, std::chrono::milliseconds timeout);

  // Destroys the communicator and stream; aborts instead when work is still pending
  // or failed (destruction never waits on peers). Logs errors; never throws.
  virtual ~NcclComm() = default;

  virtual int rank() const = 0;
  virtual int worldSize() const = 0;
  virtual int device() const = 0;
  // The communicator's cudaStream_t.
  virtual void* stream() const = 0;

  // recv[i] = op over ranks of send[i], for i < count. In place when send == recv.
  virtual void allReduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) = 0;
  // recv = root's send (send is read on the root only; in place when send == recv).
  virtual void broadcast(const void* send, void* recv, size_t count, DType dtype, int root) = 0;
  // recv (sendCount * worldSize elements) = the ranks' send buffers in rank order.
  virtual void allGather(const void* send, void* recv, size_t sendCount, DType dtype) = 0;
  // recv (recvCount elements) = block `rank` of the reduction of the ranks' send
  // buffers (recvCount * worldSize elements each).
  virtual void reduceScatter(const void* send, void* recv, size_t recvCount, DType dtype,
                             ReduceOp op) = 0;
  // Point to point; the peer posts the matching recv/send with the same count and
  // dtype. Sends and receives that must progress together (an exchange between two
  // ranks) go between groupStart() and groupEnd(), or they deadlock on the GPU.
  virtual void send(const void* data, size_t count, DType dtype, int peer) = 0;
  virtual void recv(void* data, size_t count, DType dtype, int peer) = 0;
  virtual void groupStart() = 0;
  virtual void groupEnd() = 0;

  // Makes later work on the communicator's stream wait for the work queued so far on
  // `cudaStream` (nullptr: the legacy default stream).
  virtual void waitFor(void* cudaStream) = 0;

  // Polls the stream and NCCL's asynchronous error until all enqueued work is done.
  // Never waits unbounded: after `timeout` it aborts the communicator and throws
  // TimeoutError; an NCCL/CUDA error aborts it and throws BackendError.
  virtual void synchronize(std::chrono::milliseconds timeout) = 0;

  // Aborts the communicator (unblocks this rank's pending NCCL work; peers then fail
  // or time out). Idempotent; never throws.
  virtual void abort() = 0;
  virtual bool aborted() const = 0;
};

// Device memory for tests and benchmarks (the runtime reduces tensors' own storage).
// One caller thread at a time; copies are synchronous.
class DeviceBuffer {
 public:
  // Allocates numBytes on `device`. Throws BackendError on CUDA failure or without NCCL.
  static std::unique_ptr<DeviceBuffer> allocate(int device, size_t numBytes);
  virtual ~DeviceBuffer() = default;  // frees; logs errors, never throws
  virtual void* data() = 0;
  virtual size_t numBytes() const = 0;
  // Copy numBytes (<= this->numBytes()) from / to host memory at offset 0.
  virtual void copyFromHost(const void* host, size_t numBytes) = 0;
  virtual void copyToHost(void* host, size_t numBytes) const = 0;
};

}  // namespace strata::nccl
