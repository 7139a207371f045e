#include "transport/registry.h"

#include <algorithm>

#include "core/errors.h"

namespace strata::transport {
namespace {

bool sameHost(const PeerInfo& self, const PeerInfo& peer) { return self.hostIndex == peer.hostIndex; }

bool anyRank(const PeerInfo& /*self*/, const PeerInfo& /*peer*/) { return true; }

}  // namespace

const char* kindName(Kind kind) {
  switch (kind) {
    case Kind::kShm: return "shm";
    case Kind::kTcp: return "tcp";
    case Kind::kNone: break;
  }
  return "none";
}

void Registry::add(const KindEntry& entry) {
  STRATA_CHECK(entry.kind != Kind::kNone && entry.canReach != nullptr && entry.make != nullptr,
               "transport registry: kind \"", entry.name, "\" needs a kind, a reach test and a factory");
  for (const KindEntry& e : kinds_)
    STRATA_CHECK(e.kind != entry.kind && std::string_view(e.name) != entry.name, "transport registry: \"", entry.name,
                 "\" is registered already");
  kinds_.push_back(entry);
}

const KindEntry& Registry::entry(Kind kind) const {
  for (const KindEntry& e : kinds_)
    if (e.kind == kind) return e;
  STRATA_THROW(Error, "transport registry: no transport of kind \"", kindName(kind), "\" is registered");
}

std::optional<Kind> Registry::named(std::string_view name) const {
  for (const KindEntry& e : kinds_)
    if (name == e.name) return e.kind;
  return std::nullopt;
}

const Registry& builtinRegistry() {
  static const Registry registry = [] {
    Registry r;
    r.add({Kind::kShm, "shm", sameHost, makeShmTransport});
    r.add({Kind::kTcp, "tcp", anyRank, makeTcpTransport});
    return r;
  }();
  return registry;
}

std::vector<Kind> chooseKinds(const Registry& registry, const std::vector<Kind>& enabled, const PeerInfo& self,
                              const std::vector<PeerInfo>& peers) {
  std::vector<Kind> kinds(peers.size(), Kind::kNone);
  for (size_t i = 0; i < peers.size(); ++i) {
    if (peers[i].rank == self.rank) continue;
    for (const KindEntry& e : registry.kinds()) {
      const bool on = std::find(enabled.begin(), enabled.end(), e.kind) != enabled.end();
      if (on && e.canReach(self, peers[i])) {
        kinds[i] = e.kind;
        break;
      }
    }
  }
  return kinds;
}

}  // namespace strata::transport
