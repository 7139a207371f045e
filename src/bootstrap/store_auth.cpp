#include "bootstrap/store_auth.h"

#include <cstring>

namespace strata::bootstrap::detail {
namespace {

constexpr char kClientRole[] = "store-client";
constexpr char kServerRole[] = "store-server";
// The server is not a rank: its side of every proof names rank -1.
constexpr int32_t kServerRank = -1;

void putHeader(Bytes& out) {
  const uint32_t magic = kStoreAuthMagic;
  const uint16_t version = kStoreAuthVersion;
  const uint16_t reserved = 0;
  const auto* m = reinterpret_cast<const uint8_t*>(&magic);
  const auto* v = reinterpret_cast<const uint8_t*>(&version);
  const auto* r = reinterpret_cast<const uint8_t*>(&reserved);
  out.insert(out.end(), m, m + 4);
  out.insert(out.end(), v, v + 2);
  out.insert(out.end(), r, r + 2);
}

bool headerValid(const uint8_t* data) {
  uint32_t magic = 0;
  uint16_t version = 0;
  std::memcpy(&magic, data, 4);
  std::memcpy(&version, data + 4, 2);
  return magic == kStoreAuthMagic && version == kStoreAuthVersion;
}

auth::ProofInput proofInput(const char* role, const auth::Nonce& serverNonce, const ClientProof& proof) {
  auth::ProofInput in;
  in.role = role;
  in.fromRank = proof.rank;
  in.toRank = kServerRank;
  in.nonceA = serverNonce;
  in.nonceB = proof.nonce;
  return in;
}

}  // namespace

const char* authVerdictText(AuthVerdict verdict) {
  switch (verdict) {
    case AuthVerdict::kAccepted: return "accepted";
    case AuthVerdict::kWrongSecret: return "wrong job secret";
    case AuthVerdict::kMalformed: return "not a strata store authentication message";
  }
  return "unknown verdict";
}

Bytes encodeServerHello(const auth::Nonce& serverNonce) {
  Bytes out;
  putHeader(out);
  out.insert(out.end(), serverNonce.begin(), serverNonce.end());
  return out;
}

bool decodeServerHello(const uint8_t* data, size_t numBytes, auth::Nonce* serverNonce) {
  if (numBytes != kServerHelloBytes || !headerValid(data)) return false;
  std::memcpy(serverNonce->data(), data + 8, auth::kNonceBytes);
  return true;
}

ClientProof makeClientProof(const auth::Key& key, int32_t rank, const auth::Nonce& serverNonce) {
  ClientProof proof;
  proof.rank = rank;
  proof.nonce = auth::freshNonce();
  proof.mac = auth::prove(key, proofInput(kClientRole, serverNonce, proof));
  return proof;
}

Bytes encodeClientProof(const ClientProof& proof) {
  Bytes out;
  putHeader(out);
  const auto* r = reinterpret_cast<const uint8_t*>(&proof.rank);
  out.insert(out.end(), r, r + 4);
  out.insert(out.end(), proof.nonce.begin(), proof.nonce.end());
  out.insert(out.end(), proof.mac.begin(), proof.mac.end());
  return out;
}

bool decodeClientProof(const uint8_t* data, size_t numBytes, ClientProof* proof) {
  if (numBytes != kClientProofBytes || !headerValid(data)) return false;
  std::memcpy(&proof->rank, data + 8, 4);
  std::memcpy(proof->nonce.data(), data + 12, auth::kNonceBytes);
  std::memcpy(proof->mac.data(), data + 12 + auth::kNonceBytes, auth::kMacBytes);
  return true;
}

bool clientProofValid(const auth::Key& key, const auth::Nonce& serverNonce, const ClientProof& proof) {
  return auth::verify(key, proofInput(kClientRole, serverNonce, proof), proof.mac);
}

Bytes encodeVerdict(AuthVerdict verdict, const auth::Key& key, const auth::Nonce& serverNonce,
                    const ClientProof& proof) {
  Bytes out{static_cast<uint8_t>(verdict)};
  if (verdict == AuthVerdict::kAccepted) {
    const auth::Mac mac = auth::prove(key, proofInput(kServerRole, serverNonce, proof));
    out.insert(out.end(), mac.begin(), mac.end());
  }
  return out;
}

bool serverProofValid(const auth::Key& key, const auth::Nonce& serverNonce, const ClientProof& proof,
                      const auth::Mac& serverMac) {
  return auth::verify(key, proofInput(kServerRole, serverNonce, proof), serverMac);
}

}  // namespace strata::bootstrap::detail
