#include "transport/tcp/handshake.h"

#include <cstring>

namespace strata::transport::tcp {
namespace {

constexpr uint32_t kHelloMagic = 0x48525453;  // "STRH"
// Version 1 carried the secret in clear; version 2 proves it with a MAC.
constexpr uint16_t kHelloVersion = 2;
constexpr uint8_t kFlagWantsTls = 1;

struct HelloWire {
  uint32_t magic;
  uint16_t version;
  uint8_t flags;
  uint8_t reserved;
  int32_t fromRank;
  int32_t toRank;
  uint8_t nonce[auth::kNonceBytes];
};
static_assert(sizeof(HelloWire) == 48, "the Hello is 48 packed bytes");

// First bytes of TLS records (content types): a plain end reading one of them talks to a
// peer that started TLS on its own.
constexpr uint8_t kTlsAlertRecord = 21;
constexpr uint8_t kTlsHandshakeRecord = 22;

auth::ProofInput proofInput(const char* role, const Hello& hello, const auth::Nonce& acceptorNonce) {
  auth::ProofInput in;
  in.role = role;
  in.fromRank = hello.fromRank;
  in.toRank = hello.toRank;
  in.nonceA = hello.nonce;
  in.nonceB = acceptorNonce;
  return in;
}

}  // namespace

const char* helloStatusText(HelloStatus status) {
  switch (status) {
    case HelloStatus::kAccepted: return "accepted";
    case HelloStatus::kWrongSecret: return "wrong job secret (its proof did not verify)";
    case HelloStatus::kWrongRank: return "unexpected rank (not a peer of this group, or already connected)";
    case HelloStatus::kTlsMismatch:
      return "the encryption setting differs (security.encrypt_inter_node_traffic / STRATA_TLS must be the "
             "same on every rank)";
  }
  if (static_cast<uint8_t>(status) == kTlsAlertRecord) return "a TLS alert (the peer started TLS on its own)";
  return "unknown status";
}

auth::Mac acceptorProof(const auth::Key& key, const Hello& hello, const auth::Nonce& acceptorNonce) {
  return auth::prove(key, proofInput("tcp-acceptor", hello, acceptorNonce));
}

auth::Mac dialerProof(const auth::Key& key, const Hello& hello, const auth::Nonce& acceptorNonce) {
  return auth::prove(key, proofInput("tcp-dialer", hello, acceptorNonce));
}

IoStatus sendBytes(int fd, TlsSession* tls, const void* data, size_t numBytes, Clock::time_point deadline,
                   int* err) {
  if (tls == nullptr) return sendAll(fd, data, numBytes, deadline, err);
  std::string why;
  return tls->sendAll(data, numBytes, deadline, &why);
}

IoStatus recvBytes(int fd, TlsSession* tls, void* data, size_t numBytes, Clock::time_point deadline, int* err) {
  if (tls == nullptr) return recvAll(fd, data, numBytes, deadline, err);
  std::string why;
  return tls->recvAll(data, numBytes, deadline, &why);
}

IoStatus sendHello(int fd, const Hello& hello, Clock::time_point deadline, int* err) {
  HelloWire wire{};
  wire.magic = kHelloMagic;
  wire.version = kHelloVersion;
  wire.flags = hello.wantsTls ? kFlagWantsTls : 0;
  wire.fromRank = hello.fromRank;
  wire.toRank = hello.toRank;
  std::memcpy(wire.nonce, hello.nonce.data(), auth::kNonceBytes);
  return sendAll(fd, &wire, sizeof(wire), deadline, err);
}

bool recvHello(int fd, Hello* hello, Clock::time_point deadline, std::string* why) {
  HelloWire wire{};
  int err = 0;
  const IoStatus status = recvAll(fd, &wire, sizeof(wire), deadline, &err);
  if (status != IoStatus::kOk) {
    *why = std::string("reading the handshake: ") + ioStatusText(status);
    return false;
  }
  if ((wire.magic & 0xff) == kTlsHandshakeRecord) {
    *why = "the peer started with TLS instead of a strata handshake";
    return false;
  }
  if (wire.magic != kHelloMagic || wire.version != kHelloVersion || (wire.flags & ~kFlagWantsTls) != 0) {
    *why = "not a strata tcp handshake of version " + std::to_string(kHelloVersion) +
           " (magic, version or flags wrong: another program, or another Strata version)";
    return false;
  }
  hello->fromRank = wire.fromRank;
  hello->toRank = wire.toRank;
  hello->wantsTls = (wire.flags & kFlagWantsTls) != 0;
  std::memcpy(hello->nonce.data(), wire.nonce, auth::kNonceBytes);
  return true;
}

IoStatus sendStatus(int fd, HelloStatus status, Clock::time_point deadline, int* err, TlsSession* tls) {
  const auto byte = static_cast<uint8_t>(status);
  return sendBytes(fd, tls, &byte, 1, deadline, err);
}

IoStatus recvStatus(int fd, HelloStatus* status, Clock::time_point deadline, int* err, TlsSession* tls) {
  uint8_t byte = 0;
  const IoStatus io = recvBytes(fd, tls, &byte, 1, deadline, err);
  *status = static_cast<HelloStatus>(byte);
  return io;
}

bool pairUsesTls(bool encryptInterHost, const std::string& selfHost, const std::string& peerHost) {
  return encryptInterHost && selfHost != peerHost;
}

}  // namespace strata::transport::tcp
