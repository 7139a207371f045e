// Ranks as threads of one process for the transport tests (TCP plain and TLS, shared
// memory): run a body per rank, connect one rank to every other through a shared store, or
// both (runConnected); and the receives that do not match their message, which every
// connection must report.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/store.h"
#include "core/rank_tag.h"
#include "transport/transport.h"

namespace strata::transport::testing {

// Runs fn(rank) on worldSize threads, each tagged as its rank; failures are reported
// through gtest (EXPECT_* is thread-safe) and escaping exceptions are test failures.
inline void runRanks(int worldSize, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < worldSize; ++rank) {
    threads.emplace_back([&, rank] {
      setThreadRankTag(rank, worldSize);
      try {
        fn(rank);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << rank << " threw: " << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
}

// One rank's transport and its connections, indexed by peer rank (null at self).
struct RankEnd {
  std::unique_ptr<Transport> transport;
  std::vector<std::unique_ptr<Connection>> byPeer;
};

// `hosts[r]`: rank r's host identity (which pairs use TLS); empty: all on one host.
inline RankEnd connectRank(bootstrap::Store& store, int rank, int worldSize, const TransportOptions& opts,
                           const std::vector<std::string>& hosts = {}) {
  RankEnd end;
  end.transport = makeTcpTransport(opts);
  const auto info = [&](int r) { return PeerInfo{r, hosts.empty() ? "127.0.0.1" : hosts[r], 0, 0}; };
  std::vector<PeerInfo> peers;
  for (int r = 0; r < worldSize; ++r) {
    if (r != rank) peers.push_back(info(r));
  }
  auto connections = end.transport->connect(store, info(rank), peers);
  EXPECT_EQ(connections.size(), peers.size());
  end.byPeer.resize(worldSize);
  for (size_t i = 0; i < connections.size(); ++i) {
    EXPECT_EQ(connections[i]->peer(), peers[i].rank);
    end.byPeer[peers[i].rank] = std::move(connections[i]);
  }
  return end;
}

// worldSize ranks as threads, connected to each other through a fresh HashStore with `opts`
// (`hosts` as for connectRank); fn(rank, its end, the store) then runs on each.
inline void runConnected(int worldSize, const TransportOptions& opts, const std::vector<std::string>& hosts,
                         const std::function<void(int rank, RankEnd& end, bootstrap::Store& store)>& fn) {
  auto store = bootstrap::makeHashStore();
  runRanks(worldSize, [&](int rank) {
    RankEnd end = connectRank(*store, rank, worldSize, opts, hosts);
    fn(rank, end, *store);
  });
}

// A message and the receive posted for it, which expects another tag or size.
struct MismatchCase {
  size_t sentBytes;
  uint64_t sentTag;
  size_t expectedBytes;
  uint64_t expectedTag;
};

inline const std::vector<MismatchCase> kMismatchCases = {
    {64, 1, 64, 2},            // tag differs
    {100, 5, 64, 5},           // longer than expected
    {10, 5, 64, 5},            // shorter than expected
    {0, 7, 0, 8},              // bare headers still checked
    {1 << 20, 3, 1 << 20, 4},  // large, tag differs
};

}  // namespace strata::transport::testing
