// The transport kinds a group can connect its ranks with: each registered with its factory
// and a reach test, in a documented order of preference, and the pure choice of one kind per
// peer. Callers name a kind (Kind) and ask the registry; no call site compares names.
//
// Order of preference (builtinRegistry()):
//   1. shm: ranks of one host (the same PeerInfo::hostIndex, so STRATA_HOSTS pretend hosts
//      count as hosts). One copy in and one out through a ring, no system call per message:
//      a 4 MiB message 5x and an 8-byte one 9-12x faster than TCP over loopback
//      (bench/p2p_bench.cpp; bench/RESULTS.md, "Point-to-point stage link").
//   2. tcp: any two ranks.
// A group enables the kinds its options allow (collectives/transport_plan.h); each peer
// gets the first enabled kind, in this order, that reaches it.
//
// NCCL is not a kind here: it is a communicator of its own over device memory with its own
// collectives and backend choice (nccl/nccl.h, nccl/nccl_select.h), not a byte Connection.
//
// Threading: a Registry is built once, then only read (thread-safe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "transport/transport.h"

namespace strata::transport {

enum class Kind : uint8_t { kNone = 0, kShm = 1, kTcp = 2 };
constexpr size_t kNumKinds = 3;
constexpr size_t kindIndex(Kind kind) { return static_cast<size_t>(kind); }
const char* kindName(Kind kind);  // "none", "shm", "tcp"

// Whether a connection of a kind can join `self` and `peer` at all.
using ReachTest = bool (*)(const PeerInfo& self, const PeerInfo& peer);
using Factory = std::unique_ptr<Transport> (*)(const TransportOptions& opts);

struct KindEntry {
  Kind kind = Kind::kNone;
  const char* name = "";  // as users spell it (collectives.transport, STRATA_TRANSPORT)
  ReachTest canReach = nullptr;
  Factory make = nullptr;
};

class Registry {
 public:
  // Appends a kind below the ones registered so far. Throws Error for kNone, a kind or a
  // name registered already, or a missing reach test or factory.
  void add(const KindEntry& entry);
  // Most preferred first.
  const std::vector<KindEntry>& kinds() const { return kinds_; }
  // Throws Error naming the kind when it is not registered.
  const KindEntry& entry(Kind kind) const;
  // The kind registered under `name`; nullopt for any other name.
  std::optional<Kind> named(std::string_view name) const;

 private:
  std::vector<KindEntry> kinds_;
};

// shm, then tcp (see the top of this file).
const Registry& builtinRegistry();

// Pure: for each of `peers` (the result is indexed like it), the first kind of `registry`
// that is in `enabled` and reaches the peer from `self`; kNone for self (the same rank) and
// for a peer that no enabled kind reaches.
std::vector<Kind> chooseKinds(const Registry& registry, const std::vector<Kind>& enabled, const PeerInfo& self,
                              const std::vector<PeerInfo>& peers);

}  // namespace strata::transport
