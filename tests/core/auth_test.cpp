// The job-secret proofs (core/auth.h): HKDF against RFC 5869's vector, the derived keys and
// a proof against golden values computed independently (Python's hmac, see below), and the
// bindings that make a reflected, replayed or re-targeted proof fail.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/auth.h"
#include "core/errors.h"
#include "core/hex.h"

namespace strata::auth {
namespace {

using strata::toHex;

Nonce filled(uint8_t value) {
  Nonce n{};
  n.fill(value);
  return n;
}

TEST(HkdfTest, Rfc5869TestCase1) {
  const std::string ikm(22, '\x0b');
  std::string salt, info;
  for (int i = 0; i <= 0x0c; ++i) salt += static_cast<char>(i);
  for (int i = 0xf0; i <= 0xf9; ++i) info += static_cast<char>(i);
  EXPECT_EQ(toHex(hkdfSha256(ikm, salt, info, 42)),
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865");
}

TEST(HkdfTest, RejectsLengthsOutsideTheRfcRange) {
  EXPECT_THROW(hkdfSha256("k", "s", "i", 0), Error);
  EXPECT_THROW(hkdfSha256("k", "s", "i", 255 * 32 + 1), Error);
  EXPECT_EQ(hkdfSha256("k", "s", "i", 255 * 32).size(), 255u * 32);
}

// Golden values: the RFC 5869 construction in Python (hmac, hashlib), checked against the
// RFC's vector above, with salt b"strata job secret v1" and each use's info string.
TEST(DeriveKeyTest, OneKeyPerUseFromTheDocumentedSaltAndInfo) {
  EXPECT_EQ(toHex(deriveKey("job-42", KeyUse::kTlsPsk)),
            "5ca4d0ccd5fcfe25c4721715a0f8609f76230a0aa9f1f7242aac42b08eb9c5d5");
  EXPECT_EQ(toHex(deriveKey("job-42", KeyUse::kStoreAuth)),
            "23d48c22e95291328cb0c7592a29db5be0ab2b9db61030eeac7bd7905a9d9dd2");
  EXPECT_EQ(toHex(deriveKey("job-42", KeyUse::kTransportAuth)),
            "d168b979050832edf110b33f383d01019adacb7e0bed93b39ed7603b122f2e34");
  EXPECT_NE(deriveKey("job-43", KeyUse::kTlsPsk), deriveKey("job-42", KeyUse::kTlsPsk));
}

TEST(ProofTest, MatchesTheDocumentedTranscript) {
  // HMAC-SHA256(store key of "job-42", b"strata proof v1\0" + b"\x0c" + b"store-client" +
  //             pack("<ii", 3, -1) + b"\x01"*32 + b"\x02"*32)
  const ProofInput in{"store-client", 3, -1, filled(1), filled(2)};
  EXPECT_EQ(toHex(prove(deriveKey("job-42", KeyUse::kStoreAuth), in)),
            "ff400e589755b9d9801a0fe2c2498900fcf6f157c52dd0fc1ae2897d2b3d9b2d");
}

TEST(ProofTest, EveryBoundFieldChangesTheProof) {
  const Key key = deriveKey("s", KeyUse::kTransportAuth);
  const ProofInput base{"tcp-dialer", 0, 1, filled(7), filled(9)};
  const Mac mac = prove(key, base);
  EXPECT_TRUE(verify(key, base, mac));
  std::vector<ProofInput> others(6, base);
  others[0].role = "tcp-acceptor";  // reflected to the other role
  others[1].fromRank = 2;           // another claimed identity
  others[2].toRank = 3;             // meant for another peer
  others[3].nonceA = filled(8);     // replayed on another connection
  others[4].nonceB = filled(10);
  std::swap(others[5].nonceA, others[5].nonceB);
  for (size_t i = 0; i < others.size(); ++i) EXPECT_FALSE(verify(key, others[i], mac)) << "variant " << i;
  EXPECT_FALSE(verify(deriveKey("t", KeyUse::kTransportAuth), base, mac)) << "another secret";
  EXPECT_FALSE(verify(deriveKey("s", KeyUse::kStoreAuth), base, mac)) << "the key of another use";
}

TEST(ProofTest, RolesCannotRunIntoTheRanks) {
  // The role is length-prefixed: "ab" + ranks cannot equal "a" + other bytes.
  const auto a = transcript({"ab", 0, 0, filled(0), filled(0)});
  const auto b = transcript({"a", 0x62, 0, filled(0), filled(0)});
  EXPECT_NE(a, b);
}

TEST(SecretTest, GeneratedSecretsAreLongRandomHex) {
  const std::string a = generateSecret();
  const std::string b = generateSecret();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
  EXPECT_NE(freshNonce(), freshNonce());
}

}  // namespace
}  // namespace strata::auth
