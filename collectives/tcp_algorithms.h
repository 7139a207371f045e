// Collectives over point-to-point Connections (TCP between hosts, or between local
// ranks with STRATA_TRANSPORT=tcp).
//
// AllReduce, direct (small messages; 1 round): every rank sends its whole buffer to
// every peer and reduces all n buffers in rank order. Steps: 1; bytes sent per rank
// (n-1)S.
// AllReduce, ring (large messages): ring reduce-scatter then ring all-gather over n
// shards. Steps: 2(n-1); bytes sent per rank 2S(n-1)/n (bandwidth-optimal).
// AllGather, ReduceScatter: the matching halves of the ring. Broadcast: the root sends
// to every peer. Barrier: a zero-byte exchange with every peer.
//
// Every message carries a tag derived from the call's signature (and the step), so
// ranks that called different collectives fail with MismatchError on receipt.
// All functions are blocking; one caller thread at a time per LinkSet.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "collectives/signature.h"
#include "transport/transport.h"

namespace strata::collectives {

// The members of a (sub)group reachable by connections: member i is conns[i]
// (nullptr for self); memberRanks[i] is its group rank, used in error messages.
struct LinkSet {
  int self = 0;
  std::vector<transport::Connection*> conns;
  std::vector<int> memberRanks;
  std::chrono::milliseconds timeout{300000};
  int size() const { return static_cast<int>(conns.size()); }
};

// Grow-only scratch memory owned by the caller (no allocation per call once warm).
using Scratch = std::vector<uint8_t>;

void tcpAllReduceDirect(LinkSet& links, const CollSignature& sig, const void* in, void* out,
                        size_t count, DType dtype, ReduceOp op, int avgDivisor, Scratch& scratch);
void tcpAllReduceRing(LinkSet& links, const CollSignature& sig, const void* in, void* out,
                      size_t count, DType dtype, ReduceOp op, int avgDivisor, Scratch& scratch);
void tcpBroadcast(LinkSet& links, const CollSignature& sig, void* data, size_t count, DType dtype,
                  int rootMember);
void tcpAllGather(LinkSet& links, const CollSignature& sig, const void* in, void* out,
                  size_t countPerRank, DType dtype);
void tcpReduceScatter(LinkSet& links, const CollSignature& sig, const void* in, void* out,
                      size_t countPerRank, DType dtype, ReduceOp op, int avgDivisor,
                      Scratch& scratch);
void tcpBarrier(LinkSet& links, const CollSignature& sig);

}  // namespace strata::collectives
