#include "collectives/tcp_algorithms.h"

#include <cstring>
#include <memory>

#include "collectives/reduce_kernels.h"
#include "collectives/shard_plan.h"
#include "core/errors.h"

namespace strata::collectives {
namespace {


// Tags differ per call (signature) and per step, so messages can never be confused.
uint64_t stepTag(const CollSignature& sig, uint64_t phase, uint64_t step) {
  return signatureTag(sig) + (phase << 32) + step;
}

int left(const LinkSet& l) { return (l.self + l.size() - 1) % l.size(); }
int right(const LinkSet& l) { return (l.self + 1) % l.size(); }

void waitAll(std::vector<std::unique_ptr<transport::PendingOp>>& ops, std::chrono::milliseconds timeout) {
  for (auto& op : ops) op->wait(timeout);
  ops.clear();
}

// One ring step: send `sendBytes` to the right neighbour while receiving from the left.
void exchange(LinkSet& l, uint64_t tag, const uint8_t* sendData, size_t sendBytes, uint8_t* recvData,
              size_t recvBytes) {
  std::vector<std::unique_ptr<transport::PendingOp>> ops;
  ops.push_back(l.conns[left(l)]->postRecv(recvData, recvBytes, tag));
  ops.push_back(l.conns[right(l)]->postSend(sendData, sendBytes, tag));
  waitAll(ops, l.timeout);
}

}  // namespace

void tcpAllReduceDirect(LinkSet& l, const CollSignature& sig, const void* in, void* out,
                        size_t count, DType dtype, ReduceOp op, int avgDivisor, Scratch& scratch) {
  const size_t numBytes = count * dtypeBytes(dtype);
  const int n = l.size();
  if (scratch.size() < numBytes * static_cast<size_t>(n)) scratch.resize(numBytes * static_cast<size_t>(n));
  std::vector<std::unique_ptr<transport::PendingOp>> ops;
  const uint64_t tag = stepTag(sig, 0, 0);
  for (int p = 0; p < n; ++p) {
    if (p != l.self) ops.push_back(l.conns[p]->postRecv(scratch.data() + p * numBytes, numBytes, tag));
  }
  for (int p = 0; p < n; ++p) {
    if (p != l.self) ops.push_back(l.conns[p]->postSend(in, numBytes, tag));
  }
  waitAll(ops, l.timeout);
  std::vector<const void*> srcs(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) srcs[p] = p == l.self ? in : scratch.data() + p * numBytes;
  reduceMany(op, dtype, out, srcs.data(), n, count, avgDivisor);
}

void tcpAllReduceRing(LinkSet& l, const CollSignature& sig, const void* in, void* out,
                      size_t count, DType dtype, ReduceOp op, int avgDivisor, Scratch& scratch) {
  const size_t elem = dtypeBytes(dtype);
  const int n = l.size();
  auto* data = static_cast<uint8_t*>(out);
  if (in != out) std::memcpy(out, in, count * elem);
  const std::vector<Range> shards = planShards(count, n, shardAlignElemsOf(dtype));
  const size_t maxShardBytes = shards[0].count * elem;
  if (scratch.size() < maxShardBytes) scratch.resize(maxShardBytes);
  const std::vector<RingStep> rs = planRingReduceScatter(l.self, n);
  for (size_t s = 0; s < rs.size(); ++s) {
    const Range& send = shards[rs[s].sendShard];
    const Range& recv = shards[rs[s].recvShard];
    exchange(l, stepTag(sig, 1, s), data + send.offset * elem, send.count * elem, scratch.data(),
             recv.count * elem);
    reduceInto(op, dtype, data + recv.offset * elem, scratch.data(), recv.count);
  }
  const Range& owned = shards[ringOwnedShard(l.self, n)];
  if (op == ReduceOp::kAvg) finishAvg(dtype, data + owned.offset * elem, owned.count, avgDivisor);
  const std::vector<RingStep> ag = planRingAllGather(l.self, n);
  for (size_t s = 0; s < ag.size(); ++s) {
    const Range& send = shards[ag[s].sendShard];
    const Range& recv = shards[ag[s].recvShard];
    exchange(l, stepTag(sig, 2, s), data + send.offset * elem, send.count * elem,
             data + recv.offset * elem, recv.count * elem);
  }
}

void tcpBroadcast(LinkSet& l, const CollSignature& sig, void* data, size_t count, DType dtype,
                  int rootMember) {
  const size_t numBytes = count * dtypeBytes(dtype);
  const uint64_t tag = stepTag(sig, 0, 0);
  std::vector<std::unique_ptr<transport::PendingOp>> ops;
  if (l.self == rootMember) {
    for (int p = 0; p < l.size(); ++p)
      if (p != rootMember) ops.push_back(l.conns[p]->postSend(data, numBytes, tag));
  } else {
    ops.push_back(l.conns[rootMember]->postRecv(data, numBytes, tag));
  }
  waitAll(ops, l.timeout);
}

void tcpAllGather(LinkSet& l, const CollSignature& sig, const void* in, void* out,
                  size_t countPerRank, DType dtype) {
  const size_t blockBytes = countPerRank * dtypeBytes(dtype);
  const int n = l.size();
  auto* data = static_cast<uint8_t*>(out);
  std::memmove(data + static_cast<size_t>(l.self) * blockBytes, in, blockBytes);
  for (int s = 0; s < n - 1; ++s) {
    const int sendBlock = (l.self - s + n) % n;
    const int recvBlock = (l.self - s - 1 + n) % n;
    exchange(l, stepTag(sig, 1, s), data + sendBlock * blockBytes, blockBytes,
             data + recvBlock * blockBytes, blockBytes);
  }
}

void tcpReduceScatter(LinkSet& l, const CollSignature& sig, const void* in, void* out,
                      size_t countPerRank, DType dtype, ReduceOp op, int avgDivisor,
                      Scratch& scratch) {
  const size_t blockBytes = countPerRank * dtypeBytes(dtype);
  const int n = l.size();
  // Work on a copy (the input is const): n blocks, then one block of receive space.
  const size_t workBytes = blockBytes * static_cast<size_t>(n);
  if (scratch.size() < workBytes + blockBytes) scratch.resize(workBytes + blockBytes);
  uint8_t* work = scratch.data();
  uint8_t* incoming = scratch.data() + workBytes;
  std::memcpy(work, in, workBytes);
  // The ring leaves rank r owning logical shard r+1; map logical L to block L-1 so that
  // rank r ends with block r.
  auto block = [n](int logical) { return (logical - 1 + n) % n; };
  const std::vector<RingStep> rs = planRingReduceScatter(l.self, n);
  for (size_t s = 0; s < rs.size(); ++s) {
    const int sendBlock = block(rs[s].sendShard);
    const int recvBlock = block(rs[s].recvShard);
    exchange(l, stepTag(sig, 1, s), work + sendBlock * blockBytes, blockBytes, incoming, blockBytes);
    reduceInto(op, dtype, work + recvBlock * blockBytes, incoming, countPerRank);
  }
  std::memcpy(out, work + static_cast<size_t>(l.self) * blockBytes, blockBytes);
  if (op == ReduceOp::kAvg) finishAvg(dtype, out, countPerRank, avgDivisor);
}

void tcpBarrier(LinkSet& l, const CollSignature& sig) {
  std::vector<std::unique_ptr<transport::PendingOp>> ops;
  const uint64_t tag = stepTag(sig, 0, 0);
  for (int p = 0; p < l.size(); ++p) {
    if (p == l.self) continue;
    ops.push_back(l.conns[p]->postRecv(nullptr, 0, tag));
    ops.push_back(l.conns[p]->postSend(nullptr, 0, tag));
  }
  waitAll(ops, l.timeout);
}

}  // namespace strata::collectives
