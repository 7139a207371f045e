// How ShmDomain's waits wait: spinning (someone waits for the collective) or sleeping on the
// peer's doorbell (the rank's compute thread wants the core; the doorbell itself:
// tests/transport/shm_doorbell_test.cpp). Ranks are threads here; each waits for a peer that
// arrives late.
#include <gtest/gtest.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "bootstrap/store.h"
#include "collectives/shm_domain.h"
#include "core/errors.h"

namespace strata::collectives {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::chrono::nanoseconds threadCpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// Two ranks (threads) over one domain; rank 1 reaches syncAll `late` after rank 0. Returns
// rank 0's wall time and thread CPU time in its syncAll.
struct WaitCost {
  Clock::duration wall{};
  std::chrono::nanoseconds cpu{};
};

WaitCost waitForALatePeer(std::shared_ptr<std::atomic<int>> callersWaiting, std::chrono::milliseconds late) {
  auto store = bootstrap::makeHashStore();
  std::vector<int> ranks{0, 1};
  WaitCost cost;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      ShmDomainOptions o;
      o.timeout = 20s;
      auto domain = ShmDomain::create(*store, rank, ranks, o);
      if (rank == 0 && callersWaiting) domain->setCallersWaiting(callersWaiting);
      domain->syncAll("warm-up");
      if (rank == 1) {
        std::this_thread::sleep_for(late);
        domain->syncAll("late sync");
      } else {
        const auto start = Clock::now();
        const auto cpu0 = threadCpu();
        domain->syncAll("late sync");
        cost.cpu = threadCpu() - cpu0;
        cost.wall = Clock::now() - start;
      }
      domain->syncAll("done");
    });
  }
  for (auto& t : threads) t.join();
  return cost;
}

TEST(ShmDomainWait, NobodyWaitingForTheCollectiveSleepsOnTheDoorbell) {
  const WaitCost c = waitForALatePeer(std::make_shared<std::atomic<int>>(0), 300ms);
  EXPECT_GE(c.wall, 250ms);
  EXPECT_LT(c.cpu, c.wall / 4) << "a wait nobody waits for should sleep, not spin";
}

TEST(ShmDomainWait, AnAwaitedCollectiveSpinsAndYields) {
  // The caller waits (or no executor says otherwise): spin then yield, the lowest latency.
  for (auto counter : {std::make_shared<std::atomic<int>>(1), std::shared_ptr<std::atomic<int>>()}) {
    const WaitCost c = waitForALatePeer(counter, 300ms);
    EXPECT_GE(c.wall, 250ms);
    // A spinning wait holds its core for the whole wait (cpu ~ wall when it has one, less on a
    // loaded machine); a sleeping one uses ~20 us of 300 ms. A tenth of the wall time tells
    // them apart with an order of magnitude to spare either way.
    EXPECT_GT(c.cpu, c.wall / 10) << "an awaited wait should not sleep";
  }
}

TEST(ShmDomainWait, ASleepingWaiterSeesTheGroupAbortLongBeforeItsTimeout) {
  auto store = bootstrap::makeHashStore();
  std::vector<int> ranks{0, 1};
  std::vector<std::thread> threads;
  Clock::duration waited{};
  bool threw = false;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      ShmDomainOptions o;
      o.timeout = 30s;
      auto domain = ShmDomain::create(*store, rank, ranks, o);
      domain->setCallersWaiting(std::make_shared<std::atomic<int>>(0));
      domain->syncAll("warm-up");
      if (rank == 1) {
        std::this_thread::sleep_for(100ms);
        domain->abort(1, "rank 1 gave up");
      } else {
        const auto start = Clock::now();
        try {
          domain->syncAll("never completed");
        } catch (const NetworkError& e) {
          threw = std::string(e.what()).find("rank 1 gave up") != std::string::npos;
        }
        waited = Clock::now() - start;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(threw) << "the sleeper should rethrow the abort with its reason";
  EXPECT_LT(waited, 15s);
}

}  // namespace
}  // namespace strata::collectives
