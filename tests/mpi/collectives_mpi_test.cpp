// Strata's collectives against MPI's, in real processes under mpirun: every algorithm
// the topology supports, on the same seeded inputs, must give exactly what MPI gives.
// Inputs are small integers stored in the element type, so every reduction is exact in
// every type and order, and results are compared with ==.
//
// Run with -np 2 / 4, with STRATA_TRANSPORT=tcp, and with STRATA_HOSTS=2 (two pretend
// hosts: the hierarchical path); tests/mpi/CMakeLists.txt registers the variants. Every
// rank runs every test in the same order; a test that does not apply to the topology is
// skipped on every rank alike.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/communicator.h"
#include "core/errors.h"
#include "strata/group.h"
#include "strata/runtime.h"
#include "strata/work.h"

namespace {

using strata::DType;
using strata::ReduceOp;
using Buffer = std::vector<uint8_t>;
using Clock = std::chrono::steady_clock;

const std::vector<DType> kDtypes = {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64};
const std::vector<size_t> kCounts = {0, 1, 13, 4096, (size_t{1} << 20) + 3};
// Counts per rank (allgather and reduce-scatter move size() x count): the largest still spans
// several chunks and an odd tail, at a quarter of the bytes, because Open MPI's reference
// reduce-scatter (basic linear) took 10-19 s per case at 4 x (2^20 + 3) on 2 cores.
const std::vector<size_t> kPerRankCounts = {0, 1, 13, 4096, (size_t{1} << 18) + 3};
const std::vector<std::string> kAlgos = {"auto",     "shm_oneshot", "shm_chunked",
                                         "tcp_direct", "tcp_ring",  "hierarchical"};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProd};

MPI_Datatype mpiType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
    default: break;
  }
  ADD_FAILURE() << "no MPI type for " << strata::dtypeName(dtype);
  return MPI_BYTE;
}

MPI_Op mpiOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kProd: return MPI_PROD;
    default: break;
  }
  ADD_FAILURE() << "no MPI op for " << strata::reduceOpName(op);
  return MPI_SUM;
}

template <typename Fn>
void withType(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
    case DType::kInt32: return fn(int32_t{});
    case DType::kInt64: return fn(int64_t{});
    default: ADD_FAILURE() << "unsupported dtype in this test: " << strata::dtypeName(dtype);
  }
}

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t seedOf(const std::string& text, uint64_t a, uint64_t b = 0) {
  uint64_t h = 1469598103934665603ull;
  for (char c : text) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return mix(h ^ mix(a ^ mix(b)));
}

// `count` seeded small integers: [-16, 16] (sums of up to 2^20 ranks stay exact in
// float32), or {-2, -1, 1, 2} for products (|product| <= 2^ranks).
Buffer randomBuffer(DType dtype, size_t count, uint64_t seed, bool forProduct) {
  Buffer bytes(count * strata::dtypeBytes(dtype));
  withType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = reinterpret_cast<T*>(bytes.data());
    uint64_t s = seed;
    for (size_t i = 0; i < count; ++i) {
      s = mix(s);
      int v;
      if (forProduct) {
        static constexpr int kProdValues[] = {-2, -1, 1, 2};
        v = kProdValues[s & 3];
      } else {
        v = static_cast<int>(s % 33) - 16;
      }
      p[i] = static_cast<T>(v);
    }
  });
  return bytes;
}

::testing::AssertionResult sameValues(const Buffer& got, const Buffer& want, DType dtype) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " vs expected " << want.size();
  }
  size_t mismatches = 0;
  std::ostringstream first;
  withType(dtype, [&](auto tag) {
    using T = decltype(tag);
    const size_t n = got.size() / sizeof(T);
    const T* g = reinterpret_cast<const T*>(got.data());
    const T* w = reinterpret_cast<const T*>(want.data());
    for (size_t i = 0; i < n; ++i) {
      if (g[i] == w[i]) continue;
      if (mismatches++ < 5) first << " [" << i << "] got " << +g[i] << " want " << +w[i] << ";";
    }
  });
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << mismatches << " of " << got.size() / strata::dtypeBytes(dtype)
                                       << " elements differ from MPI:" << first.str();
}

// Runs a Strata call; an exception becomes a test failure (the ranks then carry on with
// the same sequence of calls, so one rank's failure does not desynchronise the others).
::testing::AssertionResult noThrow(const std::function<void()>& fn) {
  try {
    fn();
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw: " << e.what();
  }
}

// The world's layout, agreed on by every rank (so skips are the same everywhere).
struct Layout {
  int size = 1;
  int nodes = 1;
  int minLocal = 1;
  int maxLocal = 1;
  bool shm = false;  // shared memory among the ranks of a host
  size_t slotBytes = 1 << 20;
};

const Layout& layout() {
  static const Layout l = [] {
    Layout out;
    out.size = strata::size();
    out.nodes = strata::num_nodes();
    int mine = strata::local_size();
    MPI_Allreduce(&mine, &out.minLocal, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &out.maxLocal, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    const char* transport = std::getenv("STRATA_TRANSPORT");
    out.shm = out.minLocal > 1 && !(transport && std::string(transport) == "tcp");
    if (const char* slot = std::getenv("STRATA_SHM_SLOT_BYTES")) out.slotBytes = std::strtoull(slot, nullptr, 10);
    return out;
  }();
  return l;
}

// Whether `algo` can run a `bytes`-byte allreduce here; empty when it can, else why not.
std::string unsupportedReason(const std::string& algo, size_t bytes) {
  const Layout& l = layout();
  if (algo == "auto") return "";
  if (l.size < 2) return "a single rank runs no algorithm";
  if (algo == "shm_oneshot" || algo == "shm_chunked") {
    if (l.nodes > 1) return algo + " needs a single host";
    if (!l.shm) return algo + " needs shared memory";
    if (algo == "shm_oneshot" && bytes > l.slotBytes) return "shm_oneshot only takes up to one slot";
    return "";
  }
  if (algo == "hierarchical") {
    if (l.nodes < 2) return "hierarchical needs several hosts (STRATA_HOSTS)";
    if (!l.shm || l.minLocal != l.maxLocal) return "hierarchical needs equal local sizes > 1 with shm";
    return "";
  }
  return "";  // tcp_direct, tcp_ring
}

std::string paramName(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

class StrataVsMpi : public ::testing::Test {
 protected:
  void TearDown() override { strata::world().communicator().TEST_setAllReduceAlgo("auto"); }
  int rank() const { return strata::rank(); }
  int size() const { return strata::size(); }
};

// ---------------------------------------------------------------------------------------
// AllReduce: algorithm x dtype x count, ops sum / max / min / prod, out of place and (for
// small counts) in place.

using AllReduceParam = std::tuple<std::string, DType, size_t>;

class AllReduceVsMpi : public StrataVsMpi, public ::testing::WithParamInterface<AllReduceParam> {};

TEST_P(AllReduceVsMpi, EqualsMpiAllreduce) {
  const auto& [algo, dtype, count] = GetParam();
  const size_t bytes = count * strata::dtypeBytes(dtype);
  const std::string why = unsupportedReason(algo, bytes);
  if (!why.empty()) GTEST_SKIP() << why;
  strata::Group& world = strata::world();
  world.communicator().TEST_setAllReduceAlgo(algo);
  for (ReduceOp op : kOps) {
    SCOPED_TRACE(std::string("op ") + strata::reduceOpName(op));
    const Buffer in = randomBuffer(dtype, count, seedOf(algo, count * 16 + static_cast<size_t>(op) * 4 +
                                                                  static_cast<size_t>(dtype),
                                                        static_cast<uint64_t>(rank())),
                                   op == ReduceOp::kProd);
    Buffer want(in.size());
    ASSERT_EQ(MPI_Allreduce(in.data(), want.data(), static_cast<int>(count), mpiType(dtype), mpiOp(op),
                            MPI_COMM_WORLD),
              MPI_SUCCESS);
    const Buffer inCopy = in;
    Buffer out(in.size(), 0xA5);
    EXPECT_TRUE(noThrow([&] { world.allreduce(in.data(), out.data(), count, dtype, op); }));
    EXPECT_TRUE(sameValues(out, want, dtype));
    EXPECT_TRUE(in == inCopy) << "out-of-place allreduce modified its input";
    if (algo != "auto" && size() > 1) {
      EXPECT_EQ(world.lastAllreduceAlgorithm(), algo);
    }
    if (count <= 4096) {
      Buffer io = in;
      EXPECT_TRUE(noThrow([&] { world.allreduce(io.data(), io.data(), count, dtype, op); }));
      EXPECT_TRUE(sameValues(io, want, dtype)) << "in place";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Algos, AllReduceVsMpi,
    ::testing::Combine(::testing::ValuesIn(kAlgos), ::testing::ValuesIn(kDtypes), ::testing::ValuesIn(kCounts)),
    [](const ::testing::TestParamInfo<AllReduceParam>& info) {
      return paramName(std::get<0>(info.param) + "_" + strata::dtypeName(std::get<1>(info.param)) + "_" +
                       std::to_string(std::get<2>(info.param)));
    });

// One large message (64 MiB of float32) through the algorithm the cost model picks.
TEST_F(StrataVsMpi, AllReduce64MiB) {
  const size_t count = (size_t{64} << 20) / sizeof(float);
  const DType dtype = DType::kFloat32;
  const Buffer in = randomBuffer(dtype, count, seedOf("64MiB", 0, static_cast<uint64_t>(rank())), false);
  Buffer want(in.size());
  ASSERT_EQ(MPI_Allreduce(in.data(), want.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
            MPI_SUCCESS);
  Buffer out(in.size());
  const auto start = Clock::now();
  EXPECT_TRUE(noThrow([&] { strata::world().allreduce(in.data(), out.data(), count, dtype, ReduceOp::kSum); }));
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  EXPECT_TRUE(sameValues(out, want, dtype));
  if (rank() == 0) {
    std::printf("64 MiB allreduce: algo=%s %.1f ms (%s)\n", strata::world().lastAllreduceAlgorithm().c_str(), ms,
                strata::world().describe().c_str());
  }
}

// ---------------------------------------------------------------------------------------
// Broadcast, AllGather, ReduceScatter: dtype x count.

using CollParam = std::tuple<DType, size_t>;

class OtherCollectivesVsMpi : public StrataVsMpi, public ::testing::WithParamInterface<CollParam> {};

TEST_P(OtherCollectivesVsMpi, BroadcastEqualsMpiBcast) {
  const auto& [dtype, count] = GetParam();
  for (int root : {0, size() - 1}) {
    SCOPED_TRACE("root " + std::to_string(root));
    // Every rank starts from different data; only the root's must survive.
    const Buffer initial = randomBuffer(dtype, count, seedOf("bcast", count + root, rank()), false);
    Buffer want = initial;
    ASSERT_EQ(MPI_Bcast(want.data(), static_cast<int>(count), mpiType(dtype), root, MPI_COMM_WORLD), MPI_SUCCESS);
    Buffer data = initial;
    EXPECT_TRUE(noThrow([&] { strata::world().broadcast(data.data(), count, dtype, root); }));
    EXPECT_TRUE(sameValues(data, want, dtype));
  }
}

TEST_P(OtherCollectivesVsMpi, AllgatherEqualsMpiAllgather) {
  const auto& [dtype, count] = GetParam();
  const Buffer in = randomBuffer(dtype, count, seedOf("allgather", count, rank()), false);
  Buffer want(in.size() * static_cast<size_t>(size()));
  ASSERT_EQ(MPI_Allgather(in.data(), static_cast<int>(count), mpiType(dtype), want.data(), static_cast<int>(count),
                          mpiType(dtype), MPI_COMM_WORLD),
            MPI_SUCCESS);
  Buffer out(want.size(), 0xA5);
  EXPECT_TRUE(noThrow([&] { strata::world().allgather(in.data(), out.data(), count, dtype); }));
  EXPECT_TRUE(sameValues(out, want, dtype));
}

TEST_P(OtherCollectivesVsMpi, ReduceScatterEqualsMpiReduceScatterBlock) {
  const auto& [dtype, count] = GetParam();
  for (ReduceOp op : kOps) {
    SCOPED_TRACE(std::string("op ") + strata::reduceOpName(op));
    const Buffer in = randomBuffer(dtype, count * static_cast<size_t>(size()),
                                   seedOf("reducescatter", count * 8 + static_cast<size_t>(op), rank()),
                                   op == ReduceOp::kProd);
    Buffer want(count * strata::dtypeBytes(dtype));
    ASSERT_EQ(MPI_Reduce_scatter_block(in.data(), want.data(), static_cast<int>(count), mpiType(dtype), mpiOp(op),
                                       MPI_COMM_WORLD),
              MPI_SUCCESS);
    const Buffer inCopy = in;
    Buffer out(want.size(), 0xA5);
    EXPECT_TRUE(noThrow([&] { strata::world().reduceScatter(in.data(), out.data(), count, dtype, op); }));
    EXPECT_TRUE(sameValues(out, want, dtype));
    EXPECT_TRUE(in == inCopy) << "reduceScatter modified its input";
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, OtherCollectivesVsMpi,
                         ::testing::Combine(::testing::ValuesIn(kDtypes), ::testing::ValuesIn(kPerRankCounts)),
                         [](const ::testing::TestParamInfo<CollParam>& info) {
                           return paramName(std::string(strata::dtypeName(std::get<0>(info.param))) + "_" +
                                            std::to_string(std::get<1>(info.param)));
                         });

// ---------------------------------------------------------------------------------------
// Asynchronous forms.

struct AsyncCase {
  DType dtype;
  size_t count;
  ReduceOp op;
  Buffer in, out, want;
  std::shared_ptr<strata::Work> work;
};

TEST_F(StrataVsMpi, QueuedAllreduceAsyncMatchMpiInAnyWaitOrder) {
  const size_t counts[] = {1, 13, 4096, 100003, (size_t{1} << 20) + 3, 7, 0, 65536};
  std::vector<AsyncCase> cases;
  for (size_t i = 0; i < std::size(counts); ++i) {
    AsyncCase c;
    c.dtype = kDtypes[i % kDtypes.size()];
    c.count = counts[i];
    c.op = kOps[i % 3];
    c.in = randomBuffer(c.dtype, c.count, seedOf("async", i, rank()), false);
    c.want.resize(c.in.size());
    ASSERT_EQ(MPI_Allreduce(c.in.data(), c.want.data(), static_cast<int>(c.count), mpiType(c.dtype), mpiOp(c.op),
                            MPI_COMM_WORLD),
              MPI_SUCCESS);
    c.out.assign(c.in.size(), 0xA5);
    cases.push_back(std::move(c));
  }
  strata::Group& world = strata::world();
  for (auto& c : cases) {
    EXPECT_TRUE(noThrow([&] { c.work = world.allreduceAsync(c.in.data(), c.out.data(), c.count, c.dtype, c.op); }));
  }
  // A blocking call while asynchronous ones are queued runs after them.
  const Buffer syncIn = randomBuffer(DType::kInt64, 4096, seedOf("async-sync", 0, rank()), false);
  Buffer syncWant(syncIn.size()), syncOut(syncIn.size());
  ASSERT_EQ(MPI_Allreduce(syncIn.data(), syncWant.data(), 4096, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_TRUE(noThrow([&] { world.allreduce(syncIn.data(), syncOut.data(), 4096, DType::kInt64, ReduceOp::kSum); }));
  EXPECT_TRUE(sameValues(syncOut, syncWant, DType::kInt64)) << "blocking allreduce behind queued async ones";
  // By now every queued operation ran (the blocking call was queued behind them).
  for (size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].work) {
      EXPECT_TRUE(cases[i].work->isCompleted()) << "case " << i;
    }
  }
  for (size_t i = cases.size(); i-- > 0;) {  // reverse order
    AsyncCase& c = cases[i];
    if (!c.work) continue;
    EXPECT_TRUE(noThrow([&] { c.work->wait(); })) << "case " << i;
    EXPECT_TRUE(noThrow([&] { c.work->wait(std::chrono::milliseconds(10)); })) << "second wait, case " << i;
    EXPECT_TRUE(c.work->isCompleted());
    EXPECT_EQ(c.work->exception(), nullptr);
    EXPECT_TRUE(sameValues(c.out, c.want, c.dtype)) << "case " << i << " count " << c.count;
  }
}

TEST_F(StrataVsMpi, AllreduceAsyncLoopWaitEach) {
  strata::Group& world = strata::world();
  for (int iter = 0; iter < 50; ++iter) {
    const size_t count = 1 + static_cast<size_t>(iter) * 37;
    const Buffer in = randomBuffer(DType::kInt32, count, seedOf("asyncloop", iter, rank()), false);
    Buffer want(in.size()), out(in.size());
    ASSERT_EQ(MPI_Allreduce(in.data(), want.data(), static_cast<int>(count), MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD),
              MPI_SUCCESS);
    std::shared_ptr<strata::Work> work;
    EXPECT_TRUE(noThrow([&] {
      work = world.allreduceAsync(in.data(), out.data(), count, DType::kInt32, ReduceOp::kSum);
      work->wait(std::chrono::milliseconds(60000));
    }));
    EXPECT_TRUE(sameValues(out, want, DType::kInt32)) << "iteration " << iter;
  }
}

// Launch::kHereIfIdle: with nothing queued the call runs on the caller's thread and returns a
// completed Work; behind a queued operation it is queued too, so every rank keeps the order;
// an error of a run on the caller's thread is kept for wait(), not thrown by the call.
TEST_F(StrataVsMpi, HereIfIdleRunsOnTheCallerOrBehindTheQueue) {
  using Launch = strata::Group::Launch;
  strata::Group& world = strata::world();
  const size_t count = 100003;
  Buffer here = randomBuffer(DType::kFloat64, count, seedOf("here", 0, rank()), false);
  Buffer hereWant(here.size());
  ASSERT_EQ(MPI_Allreduce(here.data(), hereWant.data(), static_cast<int>(count), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
            MPI_SUCCESS);
  std::shared_ptr<strata::Work> work;
  EXPECT_TRUE(noThrow([&] {
    work = world.allreduceAsync(here.data(), count, DType::kFloat64, ReduceOp::kSum, {}, Launch::kHereIfIdle);
  }));
  ASSERT_TRUE(work);
  EXPECT_TRUE(work->isCompleted()) << "nothing was queued: it should have run before the call returned";
  EXPECT_TRUE(noThrow([&] { work->wait(); }));
  EXPECT_TRUE(sameValues(here, hereWant, DType::kFloat64));

  // Behind a queued operation (of another size: run out of order, the sizes would not match).
  const Buffer first = randomBuffer(DType::kInt32, 4099, seedOf("here-first", 0, rank()), false);
  Buffer firstOut(first.size()), firstWant(first.size());
  Buffer second = randomBuffer(DType::kInt64, 77, seedOf("here-second", 0, rank()), false);
  Buffer secondWant(second.size());
  ASSERT_EQ(MPI_Allreduce(first.data(), firstWant.data(), 4099, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  ASSERT_EQ(MPI_Allreduce(second.data(), secondWant.data(), 77, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  std::shared_ptr<strata::Work> queued, behind;
  EXPECT_TRUE(noThrow([&] {
    queued = world.allreduceAsync(first.data(), firstOut.data(), 4099, DType::kInt32, ReduceOp::kSum);
    behind = world.allreduceAsync(second.data(), 77, DType::kInt64, ReduceOp::kSum, {}, Launch::kHereIfIdle);
    behind->wait(std::chrono::milliseconds(60000));
    queued->wait(std::chrono::milliseconds(60000));
  }));
  EXPECT_TRUE(sameValues(firstOut, firstWant, DType::kInt32)) << "the queued operation";
  EXPECT_TRUE(sameValues(second, secondWant, DType::kInt64)) << "the one behind it";

  if (size() < 2) return;
  // A failure (rank 1 passes another count, in a group of its own) reaches wait().
  std::vector<int> all(static_cast<size_t>(size()));
  for (int r = 0; r < size(); ++r) all[r] = r;
  std::shared_ptr<strata::Group> group;
  ASSERT_TRUE(noThrow([&] { group = strata::newGroup(all); }));
  std::vector<float> data(4097, 1.0f);
  const size_t myCount = rank() == 1 ? 4097 : 4096;
  std::shared_ptr<strata::Work> failed;
  EXPECT_TRUE(noThrow([&] {
    failed = group->allreduceAsync(data.data(), myCount, DType::kFloat32, ReduceOp::kSum, {}, Launch::kHereIfIdle);
  })) << "the call itself must not throw: the error belongs to its Work";
  ASSERT_TRUE(failed);
  EXPECT_TRUE(failed->isCompleted());
  EXPECT_NE(failed->exception(), nullptr);
  EXPECT_THROW(failed->wait(), strata::MismatchError);
  MPI_Barrier(MPI_COMM_WORLD);
  group.reset();
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_F(StrataVsMpi, OtherAsyncCollectivesMatchMpi) {
  strata::Group& world = strata::world();
  const size_t count = 4099;
  const DType dtype = DType::kFloat64;
  const int n = size();
  const int root = n - 1;
  Buffer bcast = randomBuffer(dtype, count, seedOf("abcast", 0, rank()), false);
  Buffer bcastWant = bcast;
  const Buffer agIn = randomBuffer(dtype, count, seedOf("aag", 0, rank()), false);
  Buffer agWant(agIn.size() * n), agOut(agIn.size() * n);
  const Buffer rsIn = randomBuffer(dtype, count * n, seedOf("ars", 0, rank()), false);
  Buffer rsWant(agIn.size()), rsOut(agIn.size());
  ASSERT_EQ(MPI_Bcast(bcastWant.data(), static_cast<int>(count), MPI_DOUBLE, root, MPI_COMM_WORLD), MPI_SUCCESS);
  ASSERT_EQ(MPI_Allgather(agIn.data(), static_cast<int>(count), MPI_DOUBLE, agWant.data(), static_cast<int>(count),
                          MPI_DOUBLE, MPI_COMM_WORLD),
            MPI_SUCCESS);
  ASSERT_EQ(MPI_Reduce_scatter_block(rsIn.data(), rsWant.data(), static_cast<int>(count), MPI_DOUBLE, MPI_MAX,
                                     MPI_COMM_WORLD),
            MPI_SUCCESS);
  std::vector<std::shared_ptr<strata::Work>> works;
  EXPECT_TRUE(noThrow([&] {
    works.push_back(world.broadcastAsync(bcast.data(), count, dtype, root));
    works.push_back(world.allgatherAsync(agIn.data(), agOut.data(), count, dtype));
    works.push_back(world.reduceScatterAsync(rsIn.data(), rsOut.data(), count, dtype, ReduceOp::kMax));
    for (auto& w : works) w->wait();
  }));
  EXPECT_TRUE(sameValues(bcast, bcastWant, dtype)) << "broadcastAsync";
  EXPECT_TRUE(sameValues(agOut, agWant, dtype)) << "allgatherAsync";
  EXPECT_TRUE(sameValues(rsOut, rsWant, dtype)) << "reduceScatterAsync";
}

// ---------------------------------------------------------------------------------------
// Mismatched calls: rank 1 passes another count. Each case uses a fresh group of all
// ranks (strata::newGroup), so the failure never poisons the world group the other tests
// use, whatever order gtest runs them in.
//
// Every rank must fail fast (a failed rank closes its connections and aborts the
// shared-memory domain, so ranks far from it in a ring or on another host are told) and
// report the mismatch (the first failing rank records why in the group's store).

class MismatchVsMpi : public StrataVsMpi, public ::testing::WithParamInterface<std::string> {};

TEST_P(MismatchVsMpi, DetectedOnEveryRankThenFailsFast) {
  const std::string algo = GetParam();
  const size_t count = 4096;
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  const std::string why = unsupportedReason(algo, (count + 1) * sizeof(float));
  if (!why.empty()) GTEST_SKIP() << why;
  std::vector<int> all(static_cast<size_t>(size()));
  for (int r = 0; r < size(); ++r) all[r] = r;
  std::shared_ptr<strata::Group> group;
  ASSERT_TRUE(noThrow([&] { group = strata::newGroup(all); }));
  group->communicator().TEST_setAllReduceAlgo(algo);
  std::vector<float> in(count + 1, 1.0f), out(count + 1, 0.0f);
  // A matched call first: the group works (and tells which algorithm "auto" picks).
  EXPECT_TRUE(noThrow([&] { group->allreduce(in.data(), out.data(), count, DType::kFloat32, ReduceOp::kSum); }));
  EXPECT_EQ(out[0], static_cast<float>(size()));
  const std::string used = group->lastAllreduceAlgorithm();

  const size_t myCount = rank() == 1 ? count + 1 : count;
  std::string error;
  bool threw = false;
  int isMismatchError = 0;
  auto start = Clock::now();
  try {
    group->allreduce(in.data(), out.data(), myCount, DType::kFloat32, ReduceOp::kSum);
  } catch (const strata::MismatchError& e) {
    threw = true;
    isMismatchError = 1;
    error = e.what();
  } catch (const strata::Error& e) {
    threw = true;
    error = e.what();
  }
  const auto detectMs = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  EXPECT_TRUE(threw) << "rank " << rank() << " did not notice that rank 1 passed count " << count + 1;
  std::string lower = error;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  const int namesMismatch = lower.find("mismatch") != std::string::npos ? 1 : 0;
  // Detected by comparing the calls, not by running into the timeout.
  EXPECT_LT(detectMs, group->timeout().count() / 2) << algo << " (" << used << "): detection took " << detectMs
                                                    << " ms: " << error;
  // Every rank says what happened.
  int everyRankMismatchError = 0;
  MPI_Allreduce(&isMismatchError, &everyRankMismatchError, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  EXPECT_EQ(everyRankMismatchError, 1) << "some rank did not throw strata::MismatchError; here: " << error;
  if (threw) {
    EXPECT_EQ(namesMismatch, 1) << "rank " << rank() << " failed without saying why: " << error;
  }

  // The group is failed now: the next call (matched or not) throws at once everywhere.
  bool threwAgain = false;
  start = Clock::now();
  try {
    group->allreduce(in.data(), out.data(), count, DType::kFloat32, ReduceOp::kSum);
  } catch (const strata::Error&) {
    threwAgain = true;
  }
  const auto againMs = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  EXPECT_TRUE(threwAgain) << "a failed group accepted another collective";
  EXPECT_LT(againMs, 1000);
  // Everyone is done with the group before anyone tears it down.
  MPI_Barrier(MPI_COMM_WORLD);
  group.reset();
  MPI_Barrier(MPI_COMM_WORLD);
  // The world group is unaffected by the failure of another group.
  std::vector<int64_t> v(13, rank() + 1), want(13);
  ASSERT_EQ(MPI_Allreduce(v.data(), want.data(), 13, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_TRUE(noThrow([&] { strata::world().allreduce(v.data(), v.data(), 13, DType::kInt64, ReduceOp::kSum); }));
  EXPECT_EQ(v, want);
}

INSTANTIATE_TEST_SUITE_P(Algos, MismatchVsMpi, ::testing::ValuesIn(kAlgos),
                         [](const ::testing::TestParamInfo<std::string>& info) { return paramName(info.param); });

}  // namespace
