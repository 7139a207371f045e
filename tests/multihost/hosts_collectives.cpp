// strata_hosts_collectives: one rank of the multi-host collectives test
// (tests/multihost/hierarchical_allreduce.sh), launched on emulated hosts by testbed.sh with
// the torchrun variables. Every collective is checked against the exact result, computed
// here from every rank's inputs (small integers, so any summation order is exact). Prints,
// one line each (rank 0 prints the lines about the world, every rank its own checks):
//
//   topology rank=R host=H node=N/M local=L/S group=<describe>
//   allreduce bytes=B algo=A wrong=K           one per size
//   bulk bytes=B repeats=K algo=A wrong=K      the repeated allreduce the caller counts bytes of
//   check <name> ok|WRONG
//   result: ok|FAILED checks=C failed_on_any_rank=F
//
// Exit codes: 0 every check passed on every rank; 1 a check failed; 3 a strata::Error.
//   --bulk-bytes B (16 MiB)  --repeats K (8)
//   --marker TEXT  instead: rank 0 broadcasts 1 MiB of TEXT repeated, 8 times, to every
//                  rank (the bytes travel unchanged over every TCP link, so a packet capture
//                  shows whether a link carries them in clear); prints "check marker ok".
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "strata/errors.h"
#include "strata/group.h"
#include "strata/runtime.h"

namespace {

int checksRun = 0;
int checksFailed = 0;

void check(bool ok, const std::string& name) {
  ++checksRun;
  checksFailed += ok ? 0 : 1;
  std::printf("check %s %s\n", name.c_str(), ok ? "ok" : "WRONG");
}

// Small integers: the sum over ranks is exact in float32 whatever the reduction order.
float inputOf(int rank, size_t i, int salt) {
  return static_cast<float>(static_cast<int>((rank * 7 + i * 13 + static_cast<size_t>(salt)) % 251) - 125);
}

// Sum AllReduce of `numBytes` bytes; returns the number of wrong elements on this rank.
size_t allreduceChecked(strata::Group& g, size_t numBytes, int salt) {
  const size_t count = numBytes / sizeof(float);
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = inputOf(g.rank(), i, salt);
  g.allreduce(buf.data(), buf.data(), count, strata::DType::kFloat32);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < g.size(); ++r) want += inputOf(r, i, salt);
    wrong += buf[i] != want;
  }
  return wrong;
}

void otherCollectives(strata::Group& world) {
  const int n = world.size(), me = world.rank();
  std::vector<double> avg(1000, me + 1.0);
  world.allreduce(avg.data(), avg.data(), avg.size(), strata::DType::kFloat64, strata::ReduceOp::kAvg);
  check(std::all_of(avg.begin(), avg.end(), [n](double v) { return v == (n + 1) / 2.0; }), "allreduce_avg_f64");

  std::vector<int32_t> mx(333, me * 10);
  world.allreduce(mx.data(), mx.data(), mx.size(), strata::DType::kInt32, strata::ReduceOp::kMax);
  check(std::all_of(mx.begin(), mx.end(), [n](int32_t v) { return v == (n - 1) * 10; }), "allreduce_max_i32");

  // From the last rank, which lives on the last host.
  std::vector<int64_t> data(100000, me == n - 1 ? 42 : -1);
  world.broadcast(data.data(), data.size(), strata::DType::kInt64, n - 1);
  check(std::all_of(data.begin(), data.end(), [](int64_t v) { return v == 42; }), "broadcast_from_last_rank");

  std::vector<int32_t> mine(1000, me), all(1000 * static_cast<size_t>(n), -1);
  world.allgather(mine.data(), all.data(), mine.size(), strata::DType::kInt32);
  bool ok = true;
  for (size_t i = 0; i < all.size(); ++i) ok = ok && all[i] == static_cast<int32_t>(i / 1000);
  check(ok, "allgather_rank_order");

  std::vector<double> blocks(256 * static_cast<size_t>(n)), block(256, 0);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<double>(i % 256 + me);
  world.reduceScatter(blocks.data(), block.data(), block.size(), strata::DType::kFloat64);
  ok = true;
  for (size_t i = 0; i < block.size(); ++i) ok = ok && block[i] == n * static_cast<double>(i) + n * (n - 1) / 2.0;
  check(ok, "reduce_scatter_sum");

  std::vector<float> grads(1 << 18, 1.0f);
  auto work = world.allreduceAsync(grads.data(), grads.data(), grads.size(), strata::DType::kFloat32,
                                   strata::ReduceOp::kAvg);
  work->wait();
  check(std::all_of(grads.begin(), grads.end(), [](float v) { return v == 1.0f; }), "allreduce_async_avg");
  world.barrier();
}

// One group per host (shared memory only) and one per local index (one rank per host,
// TCP only): the two halves of the hierarchical algorithm as groups of their own.
void subGroups(strata::Group& world) {
  const int me = world.rank(), local = strata::local_size();
  std::vector<int> sameHost, sameIndex;
  for (int r = 0; r < world.size(); ++r) {
    if (r / local == me / local) sameHost.push_back(r);
    if (r % local == me % local) sameIndex.push_back(r);
  }
  // Created in the same order on every rank (each group creation is collective over it).
  auto host = strata::newGroup(sameHost);
  auto across = strata::newGroup(sameIndex);
  check(allreduceChecked(*host, 1 << 20, 5) == 0, "host_group_allreduce");
  std::printf("subgroup kind=host algo=%s group=%s\n", host->lastAllreduceAlgorithm().c_str(),
              host->describe().c_str());
  check(allreduceChecked(*across, 1 << 20, 6) == 0, "cross_host_group_allreduce");
  std::printf("subgroup kind=cross_host algo=%s group=%s\n", across->lastAllreduceAlgorithm().c_str(),
              across->describe().c_str());
}

int broadcastMarker(const std::string& marker) {
  std::string want;
  while (want.size() < (1u << 20)) want += marker;
  for (int k = 0; k < 8; ++k) {
    std::string buf = strata::rank() == 0 ? want : std::string(want.size(), '\0');
    strata::world().broadcast(buf.data(), buf.size(), strata::DType::kUInt8, 0);
    check(buf == want, "marker_broadcast_" + std::to_string(k));
  }
  int failed = checksFailed;
  strata::world().allreduce(&failed, &failed, 1, strata::DType::kInt32);
  std::printf("result: %s checks=%d failed_on_any_rank=%d\n", failed == 0 ? "ok" : "FAILED", checksRun, failed);
  return failed == 0 ? 0 : 1;
}

int run(size_t bulkBytes, int repeats) {
  strata::Group& world = strata::world();
  std::printf("topology rank=%d host=%s node=%d/%d local=%d/%d group=%s\n", strata::rank(),
              strata::hostname().c_str(), strata::node(), strata::num_nodes(), strata::local_rank(),
              strata::local_size(), world.describe().c_str());
  for (size_t numBytes : {size_t{4} << 10, size_t{64} << 10, size_t{1} << 20, size_t{4} << 20}) {
    const size_t wrong = allreduceChecked(world, numBytes, 1);
    std::printf("allreduce bytes=%zu algo=%s wrong=%zu\n", numBytes, world.lastAllreduceAlgorithm().c_str(), wrong);
    check(wrong == 0, "allreduce_" + std::to_string(numBytes));
  }
  size_t wrong = 0;
  std::string algo;
  for (int k = 0; k < repeats; ++k) {
    wrong += allreduceChecked(world, bulkBytes, 2 + k);
    if (k == 0) algo = world.lastAllreduceAlgorithm();
    if (world.lastAllreduceAlgorithm() != algo) algo += "+" + world.lastAllreduceAlgorithm();
  }
  std::printf("bulk bytes=%zu repeats=%d algo=%s wrong=%zu\n", bulkBytes, repeats, algo.c_str(), wrong);
  check(wrong == 0, "bulk_allreduce");
  otherCollectives(world);
  subGroups(world);
  int failed = checksFailed;
  world.allreduce(&failed, &failed, 1, strata::DType::kInt32);
  std::printf("result: %s checks=%d failed_on_any_rank=%d\n", failed == 0 ? "ok" : "FAILED", checksRun, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach the log even if the rank dies
  size_t bulkBytes = 16u << 20;
  int repeats = 8;
  std::string marker;
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--bulk-bytes") bulkBytes = std::strtoull(argv[++i], nullptr, 10);
    else if (arg == "--repeats") repeats = std::atoi(argv[++i]);
    else if (arg == "--marker") marker = argv[++i];
  }
  try {
    strata::init(argc, argv);
    const int rc = marker.empty() ? run(bulkBytes, repeats) : broadcastMarker(marker);
    std::fflush(stdout);
    strata::finalize();
    return rc;
  } catch (const strata::Error& e) {
    std::printf("error: %s\n", e.what());
    return 3;
  }
}
