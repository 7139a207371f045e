#include "transport/tcp/handshake.h"

#include <algorithm>
#include <cstring>

namespace strata::transport::tcp {
namespace {

constexpr uint32_t kHelloMagic = 0x48525453;  // "STRH"
constexpr uint16_t kHelloVersion = 1;
// A secret is a short token; the bound keeps a garbage Hello from allocating much.
constexpr uint32_t kMaxSecretBytes = 4096;

struct HelloFixed {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved;
  int32_t fromRank;
  int32_t toRank;
  uint32_t secretBytes;
};
static_assert(sizeof(HelloFixed) == 20, "the Hello header is 20 packed bytes");

// First bytes of TLS records (content types): a plain end reading one of them talks to
// a peer with STRATA_TLS=1.
constexpr uint8_t kTlsAlertRecord = 21;
constexpr uint8_t kTlsHandshakeRecord = 22;

IoStatus sendBytes(int fd, TlsSession* tls, const void* data, size_t numBytes,
                   Clock::time_point deadline, int* err) {
  if (tls == nullptr) return sendAll(fd, data, numBytes, deadline, err);
  std::string why;
  return tls->sendAll(data, numBytes, deadline, &why);
}

IoStatus recvBytes(int fd, TlsSession* tls, void* data, size_t numBytes,
                   Clock::time_point deadline, int* err) {
  if (tls == nullptr) return recvAll(fd, data, numBytes, deadline, err);
  std::string why;
  return tls->recvAll(data, numBytes, deadline, &why);
}

}  // namespace

const char* helloStatusText(HelloStatus status) {
  switch (status) {
    case HelloStatus::kAccepted: return "accepted";
    case HelloStatus::kWrongSecret: return "wrong job secret";
    case HelloStatus::kWrongRank:
      return "unexpected rank (not a peer of this group, or already connected)";
  }
  if (static_cast<uint8_t>(status) == kTlsAlertRecord)
    return "a TLS alert (the peer runs with STRATA_TLS=1 and we do not: set it on every rank)";
  return "unknown status";
}

IoStatus sendHello(int fd, const Hello& hello, Clock::time_point deadline, int* err,
                   TlsSession* tls) {
  HelloFixed fixed{kHelloMagic,    kHelloVersion, 0,
                   hello.fromRank, hello.toRank,  static_cast<uint32_t>(hello.secret.size())};
  std::string bytes(reinterpret_cast<const char*>(&fixed), sizeof(fixed));
  bytes += hello.secret;
  return sendBytes(fd, tls, bytes.data(), bytes.size(), deadline, err);
}

bool recvHello(int fd, Hello* hello, Clock::time_point deadline, std::string* why,
               TlsSession* tls) {
  HelloFixed fixed{};
  int err = 0;
  IoStatus status = recvBytes(fd, tls, &fixed, sizeof(fixed), deadline, &err);
  if (status != IoStatus::kOk) {
    *why = std::string("reading the handshake: ") + ioStatusText(status);
    return false;
  }
  if (fixed.magic != kHelloMagic && (fixed.magic & 0xff) == kTlsHandshakeRecord) {
    *why = "the peer speaks TLS (it runs with STRATA_TLS=1 and we do not: set it on every rank)";
    return false;
  }
  if (fixed.magic != kHelloMagic || fixed.version != kHelloVersion ||
      fixed.secretBytes > kMaxSecretBytes) {
    *why = "not a strata tcp handshake (magic, version or length wrong)";
    return false;
  }
  hello->fromRank = fixed.fromRank;
  hello->toRank = fixed.toRank;
  hello->secret.resize(fixed.secretBytes);
  status = recvBytes(fd, tls, hello->secret.data(), hello->secret.size(), deadline, &err);
  if (status != IoStatus::kOk) {
    *why = std::string("reading the handshake secret: ") + ioStatusText(status);
    return false;
  }
  return true;
}

IoStatus sendHelloStatus(int fd, HelloStatus status, Clock::time_point deadline, int* err,
                         TlsSession* tls) {
  const auto byte = static_cast<uint8_t>(status);
  return sendBytes(fd, tls, &byte, 1, deadline, err);
}

IoStatus recvHelloStatus(int fd, HelloStatus* status, Clock::time_point deadline, int* err,
                         TlsSession* tls) {
  uint8_t byte = 0;
  const IoStatus io = recvBytes(fd, tls, &byte, 1, deadline, err);
  *status = static_cast<HelloStatus>(byte);
  return io;
}

bool secretsEqual(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

}  // namespace strata::transport::tcp
