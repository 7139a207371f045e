// Sealing the job secret for each rank (core/key_exchange.h): X25519 against RFC 7748's
// vector, and the bindings that keep a sealed copy useless to anyone but its rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/hex.h"
#include "core/key_exchange.h"

namespace strata::auth {
namespace {

template <typename Array>
Array fromHexArray(const char* hex) {
  const auto bytes = fromHex(hex);
  Array out{};
  EXPECT_TRUE(bytes.has_value() && bytes->size() == out.size()) << hex;
  if (bytes) std::memcpy(out.data(), bytes->data(), std::min(out.size(), bytes->size()));
  return out;
}

bool contains(const std::vector<uint8_t>& haystack, const std::string& needle) {
  return std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end()) != haystack.end();
}

const char kSecret[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

TEST(X25519Test, Rfc7748Section6_1) {
  const EphemeralKey alice(fromHexArray<X25519Private>("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"));
  const EphemeralKey bob(fromHexArray<X25519Private>("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"));
  EXPECT_EQ(toHex(alice.publicKey()), "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
  EXPECT_EQ(toHex(bob.publicKey()), "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
  const char kShared[] = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742";
  EXPECT_EQ(toHex(alice.agree(bob.publicKey())), kShared);
  EXPECT_EQ(toHex(bob.agree(alice.publicKey())), kShared);
}

TEST(X25519Test, FreshKeysDifferAndALowOrderPeerIsRefused) {
  const EphemeralKey a, b;
  EXPECT_NE(a.publicKey(), b.publicKey());
  EXPECT_EQ(a.agree(b.publicKey()), b.agree(a.publicKey()));
  EXPECT_THROW(a.agree(X25519Public{}), Error);  // the all-zero point: a public "shared" secret
}

TEST(SealTest, TheRankItWasSealedForOpensItAndNobodyElse) {
  const EphemeralKey rank0, rank1, rank2;
  const std::vector<uint8_t> forOne = sealSecret(rank0, rank1.publicKey(), 1, kSecret);
  EXPECT_EQ(forOne.size(), std::strlen(kSecret) + kSealTagBytes);
  EXPECT_FALSE(contains(forOne, kSecret));
  EXPECT_EQ(openSecret(rank1, rank0.publicKey(), 1, forOne), kSecret);
  // Another rank's key, another claimed rank, another sender: nothing opens.
  EXPECT_THROW(openSecret(rank2, rank0.publicKey(), 1, forOne), Error);
  EXPECT_THROW(openSecret(rank1, rank0.publicKey(), 2, forOne), Error);
  EXPECT_THROW(openSecret(rank1, rank2.publicKey(), 1, forOne), Error);
  // Every byte is covered: the ciphertext and the tag.
  for (size_t i : {size_t{0}, forOne.size() / 2, forOne.size() - 1}) {
    std::vector<uint8_t> altered = forOne;
    altered[i] ^= 1;
    EXPECT_THROW(openSecret(rank1, rank0.publicKey(), 1, altered), Error) << "byte " << i;
  }
  EXPECT_THROW(openSecret(rank1, rank0.publicKey(), 1, std::vector<uint8_t>(5)), Error);
  // Two copies for two ranks share nothing a reader could line up.
  const std::vector<uint8_t> forTwo = sealSecret(rank0, rank2.publicKey(), 2, kSecret);
  EXPECT_NE(forOne, forTwo);
  EXPECT_EQ(openSecret(rank2, rank0.publicKey(), 2, forTwo), kSecret);
}

}  // namespace
}  // namespace strata::auth
