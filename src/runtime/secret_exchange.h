// The job secret of an mpirun launch without one, delivered over MPI without crossing it in
// clear (core/key_exchange.h has the cryptography, docs/security.md the design). Two rounds of
// mpiAllGatherStrings:
//
//   1. every rank's offer: whether it has a configured secret, whether it asks for encryption
//      between hosts, and its ephemeral X25519 public key   "<has><encrypt>:<hex public key>"
//   2. rank 0's sealed copies, one per rank (rank 0's own empty)   "<hex>,<hex>,..."
//
// Every rank decides from the same offers (the presence check, the refusal), so all of them
// take the same branch. Pure functions of their arguments, tested by running every rank's
// part in one process (tests/runtime/secret_exchange_test.cpp); runtime.cpp carries them out.
#pragma once

#include <string>
#include <vector>

#include "core/key_exchange.h"

namespace strata::runtime {

struct SecretOffer {
  bool hasSecret = false;     // this rank was given a secret (environment or file)
  bool encryptInterHost = false;
  auth::X25519Public publicKey{};
};

std::string encodeOffer(const SecretOffer& offer);
// Throws strata::Error naming `rank` when `text` is not an offer.
SecretOffer decodeOffer(const std::string& text, int rank);

// Rank 0: the secret sealed for every other rank, in rank order (offers[r].publicKey).
std::string sealForRanks(const auth::EphemeralKey& rank0, const std::vector<SecretOffer>& offers,
                         const std::string& secret);
// Rank `myRank` (> 0): its copy of the secret from rank 0's message. Throws strata::Error when
// the message has no copy for it or the copy does not open.
std::string openFromRank0(const auth::EphemeralKey& mine, const auth::X25519Public& rank0, int myRank,
                          const std::string& rank0Message);

}  // namespace strata::runtime
