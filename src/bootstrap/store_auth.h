// The TcpStore's authentication step (issue #17): before any request, client and server
// prove to each other that they hold the job secret, without sending it (core/auth.h).
//
//   server -> client  hello    u32 magic "STRA" | u16 version | u16 0 | nonce Ns       (40 B)
//   client -> server  proof    u32 magic | u16 version | u16 0 | i32 rank | nonce Nc |
//                              mac prove(Ks, "store-client", rank, -1, Ns, Nc)       (76 B)
//   server -> client  verdict  u8 kAccepted | mac prove(Ks, "store-server", rank, -1, Ns, Nc)
//                              or u8 kWrongSecret / kMalformed, then the server closes
//
// Ks = deriveKey(secret, kStoreAuth). The server refuses and logs a client whose proof
// does not verify (naming the claimed rank and the peer address); the client refuses a
// server whose proof does not verify (not this job's store). Requests (tcp_store.cpp)
// follow only an accepted verdict. Pure encoding and checking; the I/O is the caller's.
#pragma once

#include <cstdint>
#include <string>

#include "bootstrap/store.h"
#include "core/auth.h"

namespace strata::bootstrap::detail {

constexpr uint32_t kStoreAuthMagic = 0x41525453;  // "STRA" little-endian
constexpr uint16_t kStoreAuthVersion = 1;
constexpr size_t kServerHelloBytes = 8 + auth::kNonceBytes;
constexpr size_t kClientProofBytes = 8 + 4 + auth::kNonceBytes + auth::kMacBytes;
constexpr size_t kVerdictAcceptedBytes = 1 + auth::kMacBytes;

enum class AuthVerdict : uint8_t { kAccepted = 0, kWrongSecret = 1, kMalformed = 2 };
const char* authVerdictText(AuthVerdict verdict);

struct ClientProof {
  int32_t rank = -1;
  auth::Nonce nonce{};
  auth::Mac mac{};
};

Bytes encodeServerHello(const auth::Nonce& serverNonce);
// False when the bytes are not a store hello of our version.
bool decodeServerHello(const uint8_t* data, size_t numBytes, auth::Nonce* serverNonce);

// The client's answer to a hello: its rank, a fresh nonce and its proof.
ClientProof makeClientProof(const auth::Key& key, int32_t rank, const auth::Nonce& serverNonce);
Bytes encodeClientProof(const ClientProof& proof);
// False when the bytes are not a proof message of our version.
bool decodeClientProof(const uint8_t* data, size_t numBytes, ClientProof* proof);
// The server's check of a decoded proof against the nonce it sent.
bool clientProofValid(const auth::Key& key, const auth::Nonce& serverNonce, const ClientProof& proof);

// The server's answer: kAccepted carries the server's own proof.
Bytes encodeVerdict(AuthVerdict verdict, const auth::Key& key, const auth::Nonce& serverNonce,
                    const ClientProof& proof);
// The client's check of an accepting server's proof.
bool serverProofValid(const auth::Key& key, const auth::Nonce& serverNonce, const ClientProof& proof,
                      const auth::Mac& serverMac);

}  // namespace strata::bootstrap::detail
