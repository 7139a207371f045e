#include "testing/rank_harness.h"

#include <unistd.h>

#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "bootstrap/store.h"
#include "core/rank_tag.h"

namespace strata::testing {

const char* transportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kShm: return "shm";
    case TransportKind::kTcp: return "tcp";
    case TransportKind::kHierarchical: return "hier";
  }
  return "?";
}

void runRanks(int worldSize, const HarnessOptions& opts,
              const std::function<void(collectives::Communicator&)>& fn) {
  auto store = bootstrap::makeHashStore();
  const int hosts = opts.kind == TransportKind::kHierarchical ? std::max(2, opts.numHosts) : opts.numHosts;
  std::vector<transport::PeerInfo> peers;
  for (int r = 0; r < worldSize; ++r) {
    transport::PeerInfo p;
    p.rank = r;
    p.hostIndex = r * std::min(hosts, worldSize) / worldSize;
    p.host = "host" + std::to_string(p.hostIndex);
    p.pid = getpid();
    peers.push_back(p);
  }
  collectives::CommOptions co;
  co.timeout = opts.timeout;
  co.transport = opts.kind == TransportKind::kTcp ? "tcp" : "auto";
  co.allreduceAlgo = opts.allreduceAlgo;
  co.shmSlotBytes = opts.shmSlotBytes;
  co.chunkBytes = opts.shmSlotBytes;
  co.directBlockBytes = opts.directBlockBytes;
  co.advertiseHost = "127.0.0.1";
  co.connectTcp = opts.connectTcp || opts.kind != TransportKind::kShm;
  std::mutex errorMutex;
  std::exception_ptr firstError;
  std::vector<std::thread> threads;
  for (int r = 0; r < worldSize; ++r) {
    threads.emplace_back([&, r] {
      setThreadRankTag(r, worldSize);
      try {
        collectives::CommOptions mine = co;
        if (opts.adjust) opts.adjust(r, mine);
        auto comm = collectives::Communicator::create(store, r, peers, mine);
        fn(*comm);
      } catch (...) {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (!firstError) firstError = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (firstError) std::rethrow_exception(firstError);
}

}  // namespace strata::testing
