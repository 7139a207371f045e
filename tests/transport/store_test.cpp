// HashStore, PrefixStore and the store helpers (setString/getString/storeBarrier).
#include "bootstrap/store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/errors.h"
#include "transport/store_testing.h"

namespace strata::bootstrap {
namespace {

using std::chrono::milliseconds;
using testing::Clock;
using testing::elapsedSince;

TEST(HashStoreTest, SetGetCheckAdd) {
  auto store = makeHashStore();
  store->set("a", Bytes{1, 2, 3});
  EXPECT_EQ(store->get("a", milliseconds(100)), (Bytes{1, 2, 3}));
  store->set("a", Bytes{4});
  EXPECT_EQ(store->get("a", milliseconds(100)), (Bytes{4}));
  EXPECT_TRUE(store->check("a"));
  EXPECT_FALSE(store->check("b"));
  EXPECT_EQ(store->add("n", 5), 5);
  EXPECT_EQ(store->add("n", -2), 3);
  EXPECT_EQ(getString(*store, "n", milliseconds(100)), "3");
  setString(*store, "s", "hello");
  EXPECT_EQ(getString(*store, "s", milliseconds(100)), "hello");
}

TEST(HashStoreTest, GetWaitsForALaterSet) {
  auto store = makeHashStore();
  const auto start = Clock::now();
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(50));
    setString(*store, "late", "value");
  });
  EXPECT_EQ(getString(*store, "late", milliseconds(2000)), "value");
  EXPECT_GE(elapsedSince(start).count(), 40);
  writer.join();
}

TEST(HashStoreTest, GetTimesOutNamingTheKey) {
  auto store = makeHashStore();
  testing::expectGetTimesOutNamingTheKey(*store, "missing/key", milliseconds(100));
}

TEST(HashStoreTest, AddOnANonNumberThrowsStoreError) {
  auto store = makeHashStore();
  setString(*store, "text", "abc");
  EXPECT_THROW(store->add("text", 1), StoreError);
}

TEST(PrefixStoreTest, NamespacesKeysUnderThePrefix) {
  auto inner = makeHashStore();
  auto groupA = makePrefixStore("groupA", inner);
  auto groupB = makePrefixStore("groupB", inner);
  setString(*groupA, "k", "a");
  setString(*groupB, "k", "b");
  EXPECT_TRUE(inner->check("groupA/k"));
  EXPECT_FALSE(inner->check("k"));
  EXPECT_EQ(getString(*groupA, "k", milliseconds(100)), "a");
  EXPECT_EQ(getString(*groupB, "k", milliseconds(100)), "b");
  EXPECT_EQ(groupA->add("n", 2), 2);
  EXPECT_EQ(inner->add("groupA/n", 1), 3);
  EXPECT_FALSE(groupB->check("n"));
  EXPECT_THROW(groupB->get("n", milliseconds(50)), TimeoutError);
}

TEST(StoreBarrierTest, ReleasesOnlyWhenAllArriveAndIsReusable) {
  constexpr int kWorldSize = 4;
  auto store = makeHashStore();
  std::atomic<int> failures{0};
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kWorldSize; ++rank) {
    ranks.emplace_back([&, rank] {
      for (int round = 1; round <= 3; ++round) {
        std::this_thread::sleep_for(milliseconds(rank * 5));  // arrive in a staggered order
        store->add("count", 1);
        storeBarrier(*store, "barrier", kWorldSize, milliseconds(3000));
        // Every rank's increment of this round happened before anybody left the barrier.
        if (store->add("count", 0) < round * kWorldSize) failures++;
        storeBarrier(*store, "barrier", kWorldSize, milliseconds(3000));
      }
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store->add("count", 0), 3 * kWorldSize);
}

TEST(StoreBarrierTest, TimeoutNamesHowManyRanksArrived) {
  auto store = makeHashStore();
  try {
    storeBarrier(*store, "lonely", 3, milliseconds(150));
    FAIL() << "a barrier with one of three ranks returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("1 of 3 ranks arrived"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata::bootstrap
