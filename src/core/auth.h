// Proving knowledge of the job secret without sending it (issue #17): the rendezvous store
// and every TCP transport connection run a challenge-response over fresh nonces from both
// sides, each side answering with an HMAC-SHA256 that binds its role and the ranks involved.
//
// Keys: the job secret is never used directly. HKDF-SHA256 (RFC 5869) turns it into one key
// per use, with a fixed salt and a per-use info string (the values below are a wire
// contract; docs/security.md lists them):
//   salt "strata job secret v1"
//   info "strata store auth v1" | "strata tcp auth v1" | "strata tls psk v1"
// so a MAC made for the store is useless on a transport connection and neither reveals the
// TLS key.
//
// A proof is HMAC-SHA256(key, transcript), the transcript being
//   "strata proof v1" 0x00 | u8 roleBytes | role | i32 fromRank | i32 toRank | nonceA | nonceB
// (little-endian). The role ("store-client", "tcp-dialer"...) differs for the two sides of a
// protocol, so a proof reflected back to its sender fails; both nonces are fresh per
// connection, so a recorded proof does not verify on a later connection; the ranks tie the
// proof to the claimed identity.
//
// Thread-safety: stateless functions, safe from any thread (OpenSSL 3 is thread-safe).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::auth {

constexpr size_t kKeyBytes = 32;
constexpr size_t kNonceBytes = 32;
constexpr size_t kMacBytes = 32;
using Key = std::array<uint8_t, kKeyBytes>;
using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;

// What a derived key is for: each use has its own HKDF info string.
enum class KeyUse { kStoreAuth, kTransportAuth, kTlsPsk };

inline constexpr char kHkdfSalt[] = "strata job secret v1";
const char* hkdfInfo(KeyUse use);

// RFC 5869 HKDF with SHA-256 (OpenSSL's EVP_KDF "HKDF"). Throws strata::Error on an
// OpenSSL failure or a length above 255 * 32 bytes.
std::vector<uint8_t> hkdfSha256(std::string_view inputKey, std::string_view salt, std::string_view info,
                                size_t numBytes);
// The key for `use` derived from the job secret ("" is a valid, if public, secret).
Key deriveKey(const std::string& secret, KeyUse use);

// The transcript a proof covers (see the header comment for its bytes).
struct ProofInput {
  std::string_view role;  // at most 255 bytes
  int32_t fromRank = -1;
  int32_t toRank = -1;
  Nonce nonceA{};  // the challenger's nonce
  Nonce nonceB{};  // the responder's nonce
};
std::vector<uint8_t> transcript(const ProofInput& input);
Mac prove(const Key& key, const ProofInput& input);
// Constant-time comparison of `mac` with the expected proof.
bool verify(const Key& key, const ProofInput& input, const Mac& mac);

// 32 bytes from OpenSSL's CSPRNG. Throws strata::Error if it fails.
Nonce freshNonce();
// A new random job secret: 64 hex characters (256 bits).
std::string generateSecret();

}  // namespace strata::auth
