// Delivering a secret over a channel others may read (issue #37): rank 0 of an mpirun job
// draws the job secret, and MPI's data path between hosts is plain TCP. So the secret never
// travels in clear: every rank makes an ephemeral X25519 key pair (RFC 7748) and publishes its
// public key; rank 0 seals the secret for each rank under a key only the two of them can
// compute, and publishes the sealed copies.
//
//   shared   = X25519(my private key, the peer's public key)          (the same on both sides)
//   key      = HKDF-SHA256(shared, salt "strata secret exchange v1",
//                          info "seal v1" | i32 toRank | senderPublic | recipientPublic)
//   sealed   = AES-256-GCM(key, nonce 0, plaintext secret, aad i32 toRank) | 16-byte tag
//
// A key seals exactly one message (the key pairs are fresh per job), so the fixed nonce is
// never reused under one key. The recipient's rank and both public keys are bound into the
// key, so a copy sealed for one rank does not open for another. What a passive observer sees
// (public keys, sealed copies) gives neither the secret nor anything to guess it from offline.
// An active attacker who can rewrite MPI's messages can substitute public keys and learn the
// secret (an unauthenticated exchange cannot prevent that): docs/security.md says where that
// matters and how to give the job a secret instead.
//
// Thread-safety: an EphemeralKey is immutable after construction; the functions are stateless.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct evp_pkey_st;  // OpenSSL's EVP_PKEY

namespace strata::auth {

constexpr size_t kX25519Bytes = 32;
constexpr size_t kSealTagBytes = 16;
using X25519Public = std::array<uint8_t, kX25519Bytes>;
using X25519Private = std::array<uint8_t, kX25519Bytes>;
using SharedSecret = std::array<uint8_t, kX25519Bytes>;

class EphemeralKey {
 public:
  // A fresh key pair from OpenSSL's CSPRNG. Throws strata::Error if OpenSSL fails.
  EphemeralKey();
  // The key pair of a given private key (known-answer tests).
  explicit EphemeralKey(const X25519Private& privateKey);

  const X25519Public& publicKey() const { return public_; }
  // X25519(this private key, peer) (RFC 7748). Throws strata::Error on a peer key that gives
  // the all-zero result (a low-order point: the "shared" secret would be public).
  SharedSecret agree(const X25519Public& peer) const;

 private:
  std::shared_ptr<evp_pkey_st> key_;
  X25519Public public_{};
};

// Seals `secret` for rank `toRank`, whose public key is `recipient` (see the header comment).
std::vector<uint8_t> sealSecret(const EphemeralKey& sender, const X25519Public& recipient, int32_t toRank,
                                const std::string& secret);
// Opens what sealSecret sealed for `myRank`. Throws strata::Error when it does not
// authenticate (another rank's copy, a wrong key, altered bytes).
std::string openSecret(const EphemeralKey& recipient, const X25519Public& sender, int32_t myRank,
                       const std::vector<uint8_t>& sealed);

}  // namespace strata::auth
