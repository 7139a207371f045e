// TLS on TCP transport connections between hosts (security.encrypt_inter_node_traffic or
// STRATA_TLS=1; issues #8, #17).
//
// Certificate-free: TLS 1.2 with pre-shared-key cipher suites, the key derived from the
// job secret by HKDF-SHA256 (core/auth.h, info "strata tls psk v1"). Both ends prove they
// hold the secret, which never crosses the wire. A peer with another secret fails the
// handshake. No renegotiation. The PSK suites have no forward secrecy: the key lives as
// long as the job's secret.
//
// Only connections between ranks of different hosts use it (handshake.h pairUsesTls):
// ranks of one host talk plain, and use shared memory anyway unless TCP is forced.
//
// Thread-safety: a TlsSession serialises its own OpenSSL calls (one mutex), so a send
// and a receive may run on different threads; it never blocks inside that mutex.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "transport/tcp/socket.h"

struct ssl_st;

namespace strata::transport::tcp {

constexpr size_t kPskBytes = 32;
// HKDF-SHA256 of the job secret (auth::KeyUse::kTlsPsk): the same secret gives the same key.
std::array<uint8_t, kPskBytes> derivePsk(const std::string& secret);
// Throws ConfigError when encryption is asked for without a secret to derive its key from.
void checkTlsOptions(bool encrypt, const std::string& jobSecret);

enum class TlsStatus { kOk, kWantIo, kClosed, kError };

class TlsSession {
 public:
  // Runs the TLS handshake on the connected socket `fd` (made non-blocking), waiting
  // at most until `deadline`. Returns null with *why on a failure or timeout.
  static std::unique_ptr<TlsSession> handshake(int fd, bool isServer, const std::string& secret,
                                               Clock::time_point deadline, std::string* why);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // Non-blocking: moves up to numBytes and sets *moved (kOk), or asks to wait for the
  // socket (kWantIo). A retry after kWantIo must pass the same bytes again.
  TlsStatus write(const void* data, size_t numBytes, size_t* moved, std::string* why);
  TlsStatus read(void* data, size_t numBytes, size_t* moved, std::string* why);
  // True while a record is half-written: only the same bytes may be written next.
  bool writePending() const;
  // The negotiated protocol and cipher suite, e.g. "TLSv1.2 PSK-AES128-GCM-SHA256".
  std::string description() const;

  // Blocking with a deadline, for the Hello exchange.
  IoStatus sendAll(const void* data, size_t numBytes, Clock::time_point deadline, std::string* why);
  IoStatus recvAll(void* data, size_t numBytes, Clock::time_point deadline, std::string* why);

 private:
  TlsSession(ssl_st* ssl, int fd, const std::string& secret);
  TlsStatus classify(int ret, std::string* why);  // requires mu_

  ssl_st* const ssl_;
  const int fd_;
  const std::array<uint8_t, kPskBytes> psk_;
  mutable std::mutex mu_;
  bool writePending_ = false;  // guarded by mu_

  friend struct TlsCallbacks;
};

}  // namespace strata::transport::tcp
