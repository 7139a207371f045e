#include "transport/shm/transport.h"

#include <sys/prctl.h>

#include <algorithm>

#include "core/errors.h"
#include "core/logging.h"
#include "transport/shm/region.h"

namespace strata::transport::shm {
namespace {

// The region id of the group's links: far from allocateShared's sequence numbers.
constexpr uint64_t kLinkRegionId = uint64_t{1} << 62;

}  // namespace

ShmTransport::ShmTransport(LocalPeers& localPeers, size_t ringBytes, std::chrono::microseconds yield)
    : localPeers_(localPeers), ringBytes_(ringBytes), yield_(yield) {}

ShmTransport::~ShmTransport() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (myBell_) ringDoorbell(*myBell_);
  if (thread_.joinable()) thread_.join();
}

std::vector<std::unique_ptr<Connection>> ShmTransport::connect(bootstrap::Store& /*store*/, const PeerInfo& self,
                                                               const std::vector<PeerInfo>& peers) {
  STRATA_CHECK(!region_, "shm transport: connect() was already called");
  const int localSize = localPeers_.localSize();
  const int me = localPeers_.localRank();
  // Local rank i is the i-th rank of this host in ascending group rank (buildTopology's order).
  std::vector<PeerInfo> locals = peers;
  locals.push_back(self);
  std::sort(locals.begin(), locals.end(), [](const PeerInfo& a, const PeerInfo& b) { return a.rank < b.rank; });
  const bool sameHost =
      std::all_of(locals.begin(), locals.end(), [&](const PeerInfo& p) { return p.hostIndex == self.hostIndex; });
  STRATA_CHECK(static_cast<int>(locals.size()) == localSize && locals[me].rank == self.rank && sameHost,
               "shm transport: rank ", self.rank, " is local rank ", me, " of ", localSize,
               " but was given ", peers.size(), " peers", sameHost ? "" : " on other hosts");
  const size_t slotBytes = kLinkPageBytes + ringBytes_;
  const size_t partBytes = kLinkPageBytes + static_cast<size_t>(localSize - 1) * slotBytes;
  region_ = Region::createShared(localPeers_, kLinkRegionId, partBytes);
  auto bellOf = [&](int local) { return reinterpret_cast<ConnectionCore::Bell*>(region_->part(local)); };
  // The ring from `sender` to `receiver` lives in the receiver's part.
  auto slotOf = [&](int sender, int receiver) {
    const int index = sender < receiver ? sender : sender - 1;
    return region_->part(receiver) + kLinkPageBytes + static_cast<size_t>(index) * slotBytes;
  };
  myBell_ = bellOf(me);
  cores_.resize(static_cast<size_t>(localSize));
  for (int p = 0; p < localSize; ++p) {
    if (p == me) continue;
    uint8_t* out = slotOf(me, p);
    uint8_t* in = slotOf(p, me);
    cores_[p] = std::make_shared<ConnectionCore>(region_, locals[p].rank, locals[p].pid,
                                                 reinterpret_cast<ConnectionCore::Ring*>(out), out + kLinkPageBytes,
                                                 reinterpret_cast<ConnectionCore::Ring*>(in), in + kLinkPageBytes,
                                                 ringBytes_, myBell_, bellOf(p), yield_);
  }
  STRATA_LOG(kDebug, kShm, "p2p shm links: ", localSize - 1, " peers, rings of ", ringBytes_, " bytes, waits yield ",
             yield_.count(), " us before sleeping");
  std::vector<std::unique_ptr<Connection>> conns;
  for (const PeerInfo& peer : peers) {
    const auto local =
        std::find_if(locals.begin(), locals.end(), [&](const PeerInfo& p) { return p.rank == peer.rank; });
    conns.push_back(std::make_unique<ShmConnection>(cores_[static_cast<size_t>(local - locals.begin())], this));
  }
  return conns;
}

void ShmTransport::kick() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    kicked_ = true;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  cv_.notify_all();
  ringDoorbell(*myBell_);
}

// Moves the bytes of ops nobody waits on (eager sends bigger than the free space), sleeping
// on the doorbell while the peers make no room, and on the condition variable when idle.
void ShmTransport::run() {
  prctl(PR_SET_TIMERSLACK, 1UL);  // a 50 us default slack would stretch every bounded sleep
  prctl(PR_SET_NAME, "strata-shmlink");
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_) return;
      kicked_ = false;
    }
    const uint32_t seen = myBell_->word.load(std::memory_order_seq_cst);
    bool pending = false;
    bool moved = false;
    ConnectionCore* sleeper = nullptr;
    for (auto& core : cores_) {
      if (!core) continue;
      moved |= core->progress(ShmOp::Kind::kSend, /*wait=*/false);
      moved |= core->progress(ShmOp::Kind::kRecv, /*wait=*/false);
      if (core->pending()) {
        pending = true;
        core->checkPeer();
        sleeper = core.get();
      }
    }
    if (moved) continue;
    if (pending) {
      sleeper->sleepOnBell(seen, kLinkSleep);
      continue;
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stop_ || kicked_; });
  }
}

}  // namespace strata::transport::shm

namespace strata::transport {

std::unique_ptr<Transport> makeShmTransport(const TransportOptions& opts) {
  STRATA_CHECK(opts.localPeers != nullptr, "shm transport: no local peers to make the links among");
  return std::make_unique<shm::ShmTransport>(*opts.localPeers, opts.ringBytes, opts.yield);
}

}  // namespace strata::transport
