// The job secret of an mpirun launch without one (runtime/secret_exchange.h): every rank's
// part of the two MPI rounds run in one process, as the ranks would run them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/errors.h"
#include "core/hex.h"
#include "runtime/secret_exchange.h"

namespace strata::runtime {
namespace {

TEST(SecretExchangeTest, EveryRankOpensRankZerosSecretAndNothingOnTheWireHoldsIt) {
  const int n = 5;
  std::vector<auth::EphemeralKey> keys(n);
  std::vector<std::string> round1;  // what mpiAllGatherStrings carries, in rank order
  for (int r = 0; r < n; ++r) round1.push_back(encodeOffer({false, r == 3, keys[r].publicKey()}));
  std::vector<SecretOffer> offers;
  for (int r = 0; r < n; ++r) offers.push_back(decodeOffer(round1[r], r));
  EXPECT_FALSE(offers[0].hasSecret);
  EXPECT_TRUE(offers[3].encryptInterHost);
  EXPECT_EQ(offers[4].publicKey, keys[4].publicKey());
  const std::string secret = "5ecret-drawn-by-rank-0-5ecret-drawn-by-rank-0-5ecret-drawn-by-ra";
  const std::string round2 = sealForRanks(keys[0], offers, secret);
  EXPECT_EQ(round2.find(secret), std::string::npos);
  EXPECT_EQ(round2.find(toHex(secret)), std::string::npos);
  for (const auto& m : round1) EXPECT_EQ(m.find(toHex(secret)), std::string::npos);
  for (int r = 1; r < n; ++r) EXPECT_EQ(openFromRank0(keys[r], offers[0].publicKey, r, round2), secret) << r;
  // A rank cannot open another's copy, nor find one past the end.
  EXPECT_THROW(openFromRank0(keys[2], offers[0].publicKey, 1, round2), Error);
  EXPECT_THROW(openFromRank0(keys[1], offers[0].publicKey, n, round2), Error);
}

TEST(SecretExchangeTest, MalformedOffersNameTheRank) {
  const auth::EphemeralKey key;
  const std::string good = encodeOffer({true, false, key.publicKey()});
  EXPECT_EQ(good.substr(0, 3), "10:");
  for (const std::string& bad : {std::string(), std::string("1"), good.substr(1), "2" + good.substr(1),
                                 good.substr(0, good.size() - 1) + "g", "11-" + good.substr(3)}) {
    try {
      decodeOffer(bad, 7);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rank 7 sent a malformed secret-exchange offer"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace strata::runtime
