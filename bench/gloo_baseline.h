// Gloo as PyTorch 1.13 runs it on CPU: c10d::ProcessGroupGloo (compiled into
// libtorch_cpu.so; TCP transport, no shared memory, 2 worker threads by default).
// Rendezvous: a c10d::TCPStore served by rank 0, its ephemeral port shared with MPI_Bcast.
// One host: store and device on 127.0.0.1. Several hosts (tests/multihost/testbed.sh):
// the store on rank 0's hostname, each rank's device on its own hostname (MPI processor
// names, which must resolve to the interface between the hosts). Needs MPI initialised.
#pragma once

#include <cstddef>
#include <memory>

namespace strata::bench {

class GlooBaseline {
 public:
  // Collective over MPI_COMM_WORLD. Throws (c10::Error) when gloo cannot connect.
  GlooBaseline(int rank, int size, bool severalHosts);
  ~GlooBaseline();
  // In-place float32 sum over `buf[0, count)`; blocks until the Work completes.
  // The tensor wrapping `buf` is cached per (buf, count), as a training loop holds its tensors.
  void allreduce(float* buf, size_t count);
  // "c10d::ProcessGroupGloo threads=2 device=tcp:127.0.0.1 store=TCPStore:127.0.0.1:<port>"
  const char* describe() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::bench
