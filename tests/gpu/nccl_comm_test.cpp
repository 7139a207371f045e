// NCCL bootstrap and communicator tests.
//
// The unique-id exchange and the no-GPU behaviour run everywhere. Tests that create a
// communicator need CUDA devices and report SKIPPED without them (every CI machine we
// have). Ranks are threads of this process, one device each, sharing an in-memory store.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/build_config.h"
#include "core/errors.h"
#include "core/rank_tag.h"
#include "transport/nccl/nccl.h"
#include "transport/transport_testing.h"

namespace strata::nccl {
namespace {

using namespace std::chrono_literals;
using bootstrap::Bytes;

// A minimal thread-safe in-memory Store (the tests do not depend on HashStore).
class FakeStore : public bootstrap::Store {
 public:
  void set(const std::string& key, const Bytes& value) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      values_[key] = value;
      ++sets_;
    }
    cv_.notify_all();
  }
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++gets_;
    if (!cv_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; })) {
      STRATA_THROW(TimeoutError, "FakeStore: key \"", key, "\" not set within ", timeout.count(),
                   " ms");
    }
    return values_.at(key);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    std::lock_guard<std::mutex> lock(mu_);
    Bytes& bytes = values_[key];
    const int64_t value =
        (bytes.empty() ? 0 : std::stoll(std::string(bytes.begin(), bytes.end()))) + delta;
    const std::string text = std::to_string(value);
    bytes.assign(text.begin(), text.end());
    cv_.notify_all();
    return value;
  }
  bool check(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    return values_.count(key) > 0;
  }
  std::vector<std::string> keys() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& kv : values_) out.push_back(kv.first);
    return out;
  }
  int sets() {
    std::lock_guard<std::mutex> lock(mu_);
    return sets_;
  }
  int gets() {
    std::lock_guard<std::mutex> lock(mu_);
    return gets_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Bytes> values_;
  int sets_ = 0;
  int gets_ = 0;
};

// The ranks are threads (transport/transport_testing.h): an exception on one is its failure.
using transport::testing::runRanks;

Bytes fakeId(uint8_t seed) {
  Bytes id(128);
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(seed + i);
  return id;
}

// --- unique-id exchange (no GPU) ---

TEST(NcclBootstrap, RankZeroPublishesAndEveryRankGetsTheSameId) {
  constexpr int kWorld = 5;
  FakeStore store;
  std::atomic<int> makeCalls{0};
  std::vector<Bytes> got(kWorld);
  runRanks(kWorld, [&](int rank) {
    if (rank == 0) std::this_thread::sleep_for(50ms);  // the others must wait for it
    got[rank] = exchangeUniqueId(
        store, rank,
        [&] {
          ++makeCalls;
          return fakeId(7);
        },
        10s);
  });
  EXPECT_EQ(makeCalls.load(), 1);
  for (int rank = 0; rank < kWorld; ++rank) EXPECT_EQ(got[rank], fakeId(7)) << "rank " << rank;
  EXPECT_EQ(store.keys(), std::vector<std::string>{kUniqueIdKey});
  EXPECT_EQ(std::string(kUniqueIdKey), "nccl/uid");
  EXPECT_EQ(store.sets(), 1);
  EXPECT_EQ(store.gets(), kWorld - 1);  // rank 0 never reads the store
}

TEST(NcclBootstrap, OtherRanksNeverCallMakeId) {
  FakeStore store;
  store.set(kUniqueIdKey, fakeId(3));
  const Bytes id = exchangeUniqueId(
      store, 2, []() -> Bytes { throw std::logic_error("makeId called on rank 2"); }, 1s);
  EXPECT_EQ(id, fakeId(3));
}

TEST(NcclBootstrap, MissingRankZeroTimesOutNamingTheKey) {
  FakeStore store;
  const auto start = std::chrono::steady_clock::now();
  try {
    exchangeUniqueId(
        store, 1, [] { return fakeId(1); }, 100ms);
    FAIL() << "expected TimeoutError";
  } catch (const TimeoutError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("nccl/uid"), std::string::npos) << what;
    EXPECT_NE(what.find("100 ms"), std::string::npos) << what;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(NcclBootstrap, RejectsBadArguments) {
  FakeStore store;
  EXPECT_THROW(exchangeUniqueId(
                   store, -1, [] { return fakeId(1); }, 1s),
               Error);
  EXPECT_THROW(exchangeUniqueId(
                   store, 0, [] { return Bytes{}; }, 1s),
               Error);
  EXPECT_THROW(exchangeUniqueId(store, 0, nullptr, 1s), Error);
  EXPECT_EQ(store.sets(), 0);
}

// --- availability (no GPU needed) ---

TEST(NcclAvailability, ConsistentWithTheBuild) {
  EXPECT_EQ(isCompiled(), STRATA_HAVE_NCCL == 1);
  EXPECT_GE(deviceCount(), 0);
  EXPECT_EQ(deviceCount(), deviceCount());  // cached, stable
  EXPECT_EQ(isAvailable(), isCompiled() && deviceCount() > 0);
  if (!isCompiled()) {
    EXPECT_EQ(deviceCount(), 0);
  }
}

TEST(NcclAvailability, CreateWithoutADeviceThrowsBackendErrorPromptly) {
  if (deviceCount() > 0) GTEST_SKIP() << "this host has CUDA devices";
  FakeStore store;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(NcclComm::create(store, 0, 1, 0, 30s), BackendError);
  EXPECT_THROW(DeviceBuffer::allocate(0, 64), BackendError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(store.sets(), 0);  // failed before publishing anything
}

// --- GPU tests (SKIPPED without CUDA devices) ---

#define STRATA_REQUIRE_DEVICES(n)                                                    \
  do {                                                                               \
    if (deviceCount() < (n))                                                         \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s), found " << deviceCount(); \
  } while (0)

constexpr auto kCreateTimeout = 60s;
constexpr auto kSyncTimeout = 30s;

void toDevice(DeviceBuffer& buffer, const std::vector<float>& host) {
  buffer.copyFromHost(host.data(), host.size() * sizeof(float));
}

std::vector<float> fromDevice(const DeviceBuffer& buffer, size_t count) {
  std::vector<float> host(count);
  buffer.copyToHost(host.data(), count * sizeof(float));
  return host;
}

TEST(NcclComm, SingleRankAllReduceIsIdentity) {
  STRATA_REQUIRE_DEVICES(1);
  FakeStore store;
  auto comm = NcclComm::create(store, 0, 1, 0, kCreateTimeout);
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->worldSize(), 1);
  EXPECT_NE(comm->stream(), nullptr);
  constexpr size_t kCount = 1000;
  auto buffer = DeviceBuffer::allocate(0, kCount * sizeof(float));
  std::vector<float> input(kCount);
  for (size_t i = 0; i < kCount; ++i) input[i] = static_cast<float>(i % 17);
  toDevice(*buffer, input);
  comm->allReduce(buffer->data(), buffer->data(), kCount, DType::kFloat32, ReduceOp::kSum);
  comm->synchronize(kSyncTimeout);
  EXPECT_EQ(fromDevice(*buffer, kCount), input);
}

// Ranks are threads, one device each (NCCL allows one rank per device per communicator).
TEST(NcclComm, CollectivesAcrossDevicesMatchReference) {
  STRATA_REQUIRE_DEVICES(2);
  const int world = std::min(deviceCount(), 4);
  constexpr size_t kCount = 13;  // does not divide evenly by anything useful
  FakeStore store;
  runRanks(world, [&](int rank) {
    const int device = deviceForLocalRank(rank, deviceCount());
    auto comm = NcclComm::create(store, rank, world, device, kCreateTimeout);
    auto a = DeviceBuffer::allocate(device, kCount * world * sizeof(float));
    auto b = DeviceBuffer::allocate(device, kCount * world * sizeof(float));

    // allReduce(sum): small integers stored in float, so sums are exact.
    std::vector<float> mine(kCount);
    for (size_t i = 0; i < kCount; ++i) mine[i] = static_cast<float>(rank + 1 + i);
    toDevice(*a, mine);
    comm->allReduce(a->data(), b->data(), kCount, DType::kFloat32, ReduceOp::kSum);
    comm->synchronize(kSyncTimeout);
    std::vector<float> expected(kCount);
    for (size_t i = 0; i < kCount; ++i) {
      expected[i] = static_cast<float>(world * (world + 1) / 2 + world * static_cast<int>(i));
    }
    EXPECT_EQ(fromDevice(*b, kCount), expected) << "allReduce on rank " << rank;

    // broadcast from the last rank, in place.
    const int root = world - 1;
    toDevice(*a, std::vector<float>(kCount, static_cast<float>(rank * 10)));
    comm->broadcast(a->data(), a->data(), kCount, DType::kFloat32, root);
    comm->synchronize(kSyncTimeout);
    EXPECT_EQ(fromDevice(*a, kCount), std::vector<float>(kCount, root * 10.0f));

    // allGather: block r holds rank r's values.
    toDevice(*a, std::vector<float>(kCount, static_cast<float>(rank)));
    comm->allGather(a->data(), b->data(), kCount, DType::kFloat32);
    comm->synchronize(kSyncTimeout);
    const std::vector<float> gathered = fromDevice(*b, kCount * world);
    for (int r = 0; r < world; ++r) {
      for (size_t i = 0; i < kCount; ++i)
        ASSERT_EQ(gathered[r * kCount + i], static_cast<float>(r));
    }

    // reduceScatter(max): element j of the full vector is max over ranks of (rank + j).
    std::vector<float> full(kCount * world);
    for (size_t j = 0; j < full.size(); ++j) full[j] = static_cast<float>(rank + j);
    toDevice(*a, full);
    comm->reduceScatter(a->data(), b->data(), kCount, DType::kFloat32, ReduceOp::kMax);
    comm->synchronize(kSyncTimeout);
    const std::vector<float> block = fromDevice(*b, kCount);
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(block[i], static_cast<float>(world - 1 + rank * kCount + i));
    }

    // send/recv around a ring, grouped so the exchange cannot deadlock.
    toDevice(*a, std::vector<float>(kCount, static_cast<float>(rank)));
    comm->groupStart();
    comm->send(a->data(), kCount, DType::kFloat32, (rank + 1) % world);
    comm->recv(b->data(), kCount, DType::kFloat32, (rank + world - 1) % world);
    comm->groupEnd();
    comm->synchronize(kSyncTimeout);
    EXPECT_EQ(fromDevice(*b, kCount),
              std::vector<float>(kCount, static_cast<float>((rank + world - 1) % world)));
  });
}

// Rank 1 never joins the allReduce: rank 0's synchronize must time out, abort, and
// make every later call fail at once instead of hanging.
TEST(NcclComm, SynchronizeTimesOutAndAborts) {
  STRATA_REQUIRE_DEVICES(2);
  FakeStore store;
  runRanks(2, [&](int rank) {
    auto comm = NcclComm::create(store, rank, 2, rank, 20s);
    auto buffer = DeviceBuffer::allocate(rank, 1024 * sizeof(float));
    if (rank == 0) {
      comm->allReduce(buffer->data(), buffer->data(), 1024, DType::kFloat32, ReduceOp::kSum);
      const auto start = std::chrono::steady_clock::now();
      EXPECT_THROW(comm->synchronize(300ms), TimeoutError);
      EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
      EXPECT_TRUE(comm->aborted());
      EXPECT_THROW(
          comm->allReduce(buffer->data(), buffer->data(), 1024, DType::kFloat32, ReduceOp::kSum),
          BackendError);
    }
    // Both destructors must return (rank 1's finalize is bounded by the create timeout).
  });
}

TEST(NcclComm, RejectsBadArguments) {
  STRATA_REQUIRE_DEVICES(1);
  FakeStore store;
  EXPECT_THROW(NcclComm::create(store, 1, 1, 0, 1s), Error);
  EXPECT_THROW(NcclComm::create(store, 0, 1, deviceCount(), 1s), BackendError);
  auto comm = NcclComm::create(store, 0, 1, 0, kCreateTimeout);
  EXPECT_THROW(comm->broadcast(nullptr, nullptr, 0, DType::kFloat32, 1), Error);
  EXPECT_THROW(comm->send(nullptr, 4, DType::kFloat32, 0), Error);
  EXPECT_THROW(comm->groupEnd(), Error);
}

}  // namespace
}  // namespace strata::nccl
