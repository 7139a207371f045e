// The transport registry (transport/registry.h): the built-in kinds and their order of
// preference, a table of peers and enabled kinds against the choice per peer (with fake
// kinds, so the choice is tested apart from what shm and tcp reach), and bad registrations.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/errors.h"
#include "transport/registry.h"

namespace strata::transport {
namespace {

constexpr Kind kNone = Kind::kNone;
constexpr Kind kShm = Kind::kShm;
constexpr Kind kTcp = Kind::kTcp;

PeerInfo rankOn(int rank, int hostIndex) { return PeerInfo{rank, "h" + std::to_string(hostIndex), hostIndex, 0}; }

TEST(TransportRegistry, BuiltinKindsAreShmThenTcpWithTheirNames) {
  const Registry& r = builtinRegistry();
  ASSERT_EQ(r.kinds().size(), 2u);
  EXPECT_EQ(r.kinds()[0].kind, kShm);
  EXPECT_EQ(r.kinds()[1].kind, kTcp);
  EXPECT_STREQ(r.entry(kShm).name, "shm");
  EXPECT_STREQ(r.entry(kTcp).name, "tcp");
  EXPECT_STREQ(kindName(kNone), "none");
  EXPECT_EQ(r.named("shm"), kShm);
  EXPECT_EQ(r.named("tcp"), kTcp);
  EXPECT_EQ(r.named("auto"), std::nullopt);
  EXPECT_EQ(r.named("nccl"), std::nullopt);  // a communicator, not a kind
  EXPECT_THROW(r.entry(kNone), Error);
}

TEST(TransportRegistry, BuiltinReachSharedMemoryOnOneHostTcpEverywhere) {
  const Registry& r = builtinRegistry();
  EXPECT_TRUE(r.entry(kShm).canReach(rankOn(0, 4), rankOn(1, 4)));
  EXPECT_FALSE(r.entry(kShm).canReach(rankOn(0, 4), rankOn(1, 5)));
  EXPECT_TRUE(r.entry(kTcp).canReach(rankOn(0, 4), rankOn(1, 5)));
}

std::unique_ptr<Transport> noTransport(const TransportOptions&) { return nullptr; }
bool evenRanks(const PeerInfo&, const PeerInfo& peer) { return peer.rank % 2 == 0; }
bool everyRank(const PeerInfo&, const PeerInfo&) { return true; }

// A registry of fake kinds: kShm reaches even ranks only, kTcp every rank.
Registry fakeRegistry(bool tcpFirst) {
  Registry r;
  const KindEntry even{kShm, "even", evenRanks, noTransport};
  const KindEntry every{kTcp, "every", everyRank, noTransport};
  r.add(tcpFirst ? every : even);
  r.add(tcpFirst ? even : every);
  return r;
}

TEST(TransportRegistry, EachPeerGetsTheFirstEnabledKindThatReachesIt) {
  struct Case {
    const char* what;
    bool tcpFirst;
    std::vector<Kind> enabled;
    std::vector<Kind> want;  // for ranks 0..4, self = rank 1
  };
  const std::vector<Case> cases = {
      {"preferred where it reaches", false, {kShm, kTcp}, {kShm, kNone, kShm, kTcp, kShm}},
      {"the order is the registry's, not the enabled list's", false, {kTcp, kShm}, {kShm, kNone, kShm, kTcp, kShm}},
      {"the other order of preference", true, {kShm, kTcp}, {kTcp, kNone, kTcp, kTcp, kTcp}},
      {"only one kind enabled", false, {kTcp}, {kTcp, kNone, kTcp, kTcp, kTcp}},
      {"no kind reaches the odd ranks", false, {kShm}, {kShm, kNone, kShm, kNone, kShm}},
      {"nothing enabled", false, {}, {kNone, kNone, kNone, kNone, kNone}},
  };
  std::vector<PeerInfo> peers;
  for (int r = 0; r < 5; ++r) peers.push_back(rankOn(r, 0));
  for (const Case& c : cases)
    EXPECT_EQ(chooseKinds(fakeRegistry(c.tcpFirst), c.enabled, peers[1], peers), c.want) << c.what;
}

TEST(TransportRegistry, BadRegistrationsThrow) {
  Registry r;
  r.add({kShm, "shm", everyRank, noTransport});
  EXPECT_THROW(r.add({kShm, "other", everyRank, noTransport}), Error);  // the kind again
  EXPECT_THROW(r.add({kTcp, "shm", everyRank, noTransport}), Error);    // the name again
  EXPECT_THROW(r.add({kNone, "none", everyRank, noTransport}), Error);
  EXPECT_THROW(r.add({kTcp, "tcp", nullptr, noTransport}), Error);
  EXPECT_THROW(r.add({kTcp, "tcp", everyRank, nullptr}), Error);
  EXPECT_THROW(r.entry(kTcp), Error);
  EXPECT_EQ(r.kinds().size(), 1u);
}

}  // namespace
}  // namespace strata::transport
