// The main job until data-parallel training lands: every rank runs every collective,
// checks the result against a reference it computes itself, and rank 0 prints a summary
// (topology, algorithm chosen per size, time and bus bandwidth).
//
//   mpirun -np 4 build/examples/collectives_tour --config examples/collectives_tour.json
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <vector>

#include "common/strata_main.h"
#include "strata/group.h"
#include "strata/runtime.h"

namespace {

using Clock = std::chrono::steady_clock;

int checksFailed = 0;
int checksRun = 0;

void check(bool ok, const char* what) {
  ++checksRun;
  if (!ok) {
    ++checksFailed;
    std::fprintf(stderr, "[rank %d] CHECK FAILED: %s\n", strata::rank(), what);
  }
}

// Every rank's input is small integers, so the expected sum is exact.
float inputOf(int rank, size_t i) { return static_cast<float>((rank + i) % 7); }

struct Row {
  size_t numBytes;
  std::string algo;
  double us;
  double busbw;
  bool ok;
};

Row timeAllreduce(strata::Group& world, size_t numBytes) {
  const size_t count = numBytes / sizeof(float);
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = inputOf(world.rank(), i);
  world.allreduce(buf.data(), buf.data(), count, strata::DType::kFloat32);
  bool ok = true;
  for (size_t i = 0; i < count && ok; ++i) {
    float want = 0;
    for (int r = 0; r < world.size(); ++r) want += inputOf(r, i);
    ok = buf[i] == want;
  }
  const int iters = numBytes <= (64 << 10) ? 200 : numBytes <= (1 << 20) ? 50 : 5;
  std::vector<double> trials;
  std::string algo;
  for (int t = 0; t < 3; ++t) {
    world.barrier();
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) world.allreduce(buf.data(), buf.data(), count, strata::DType::kFloat32);
    double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iters;
    algo = world.lastAllreduceAlgorithm();
    world.allreduce(&us, &us, 1, strata::DType::kFloat64, strata::ReduceOp::kMax);  // slowest rank
    trials.push_back(us);
  }
  std::sort(trials.begin(), trials.end());
  const double us = trials[1];
  const double n = world.size();
  return Row{numBytes, algo, us, numBytes / us / 1e3 * 2 * (n - 1) / n, ok};
}

void otherCollectives(strata::Group& world) {
  const int n = world.size(), me = world.rank();
  std::vector<int64_t> data(1000, me == n - 1 ? 42 : -1);
  world.broadcast(data.data(), data.size(), strata::DType::kInt64, n - 1);
  check(std::all_of(data.begin(), data.end(), [](int64_t v) { return v == 42; }), "broadcast from the last rank");

  std::vector<int32_t> mine(10, me), all(10 * n, -1);
  world.allgather(mine.data(), all.data(), 10, strata::DType::kInt32);
  bool ok = true;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < 10; ++i) ok = ok && all[r * 10 + i] == r;
  check(ok, "allgather in rank order");

  std::vector<double> blocks(4 * n, me + 1.0), block(4, 0);
  world.reduceScatter(blocks.data(), block.data(), 4, strata::DType::kFloat64);
  check(std::all_of(block.begin(), block.end(), [n](double v) { return v == n * (n + 1) / 2.0; }),
        "reduce_scatter sum");

  // An asynchronous allreduce overlapped with local work, as gradient buckets are.
  std::vector<float> grads(1 << 18, 1.0f);
  auto work = world.allreduceAsync(grads.data(), grads.data(), grads.size(), strata::DType::kFloat32,
                                   strata::ReduceOp::kAvg);
  volatile double busy = 0;
  for (int i = 0; i < 100000; ++i) busy = busy + i * 0.5;
  work->wait();
  check(std::all_of(grads.begin(), grads.end(), [](float v) { return v == 1.0f; }), "async allreduce avg");

  // Sub-groups: even and odd ranks, as data-parallel groups of a pipeline would be.
  std::vector<int> members;
  for (int r = me % 2; r < n; r += 2) members.push_back(r);
  auto sub = strata::newGroup(members);
  int32_t value = me, sum = 0;
  sub->allreduce(&value, &sum, 1, strata::DType::kInt32);
  int32_t want = 0;
  for (int r : members) want += r;
  check(sum == want, "sub-group allreduce");
  world.barrier();
}

// The tour itself: 0 when every check passed on every rank, else 1.
int tour() {
  strata::Group& world = strata::world();
  if (strata::rank() == 0) {
    std::printf("Strata collectives tour: %d ranks on %d host(s); %s\n", strata::size(), strata::num_nodes(),
                world.describe().c_str());
    std::printf("%12s  %-14s %12s %14s  %s\n", "size (B)", "algorithm", "time (us)", "busbw (GB/s)", "check");
  }
  std::vector<Row> rows;
  for (size_t numBytes : {size_t{4} << 10, size_t{64} << 10, size_t{1} << 20, size_t{16} << 20, size_t{64} << 20}) {
    rows.push_back(timeAllreduce(world, numBytes));
    check(rows.back().ok, "allreduce result");
    if (strata::rank() == 0) {
      const Row& r = rows.back();
      std::printf("%12zu  %-14s %12.2f %14.2f  %s\n", r.numBytes, r.algo.c_str(), r.us, r.busbw, r.ok ? "ok" : "WRONG");
    }
  }
  otherCollectives(world);
  int failed = checksFailed;
  world.allreduce(&failed, &failed, 1, strata::DType::kInt32);
  if (strata::rank() == 0) {
    std::printf("broadcast, allgather, reduce_scatter, async allreduce, sub-groups: %s\n",
                failed == 0 ? "ok" : "FAILED");
    std::printf("%s: %d checks per rank, %d failed across all ranks\n", failed == 0 ? "PASS" : "FAIL", checksRun,
                failed);
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

// An error (a bad job config, a wrong job secret, a failed peer) ends the rank with the code
// docs/exit_status.md gives it: 78 for a config error, 1 otherwise.
int main(int argc, char** argv) { return examples::runWithStrata(argc, argv, tour); }
