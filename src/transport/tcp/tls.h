// Optional TLS on TCP transport connections (STRATA_TLS=1, issue #8).
//
// Certificate-free: TLS 1.2 with pre-shared-key cipher suites, the key derived from the
// job secret (STRATA_JOB_SECRET). Both ends prove they hold the secret, and the secret
// itself never crosses the wire (the plain Hello carries it in clear). A peer with
// another secret fails the handshake. No renegotiation. The PSK suites have no forward
// secrecy: the key lives as long as the job's secret.
//
// When TLS is on, every TCP connection uses it (also two ranks of one host forced onto
// TCP): simpler than telling hosts apart here, and the shared-memory transport carries
// same-host traffic in normal runs anyway.
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
// SHA-256 of a fixed label and the job secret: the same secret gives the same key.
std::array<uint8_t, kPskBytes> derivePsk(const std::string& secret);
// Throws ConfigError when TLS is asked for without a secret to derive its key from.
void checkTlsOptions(bool tls, const std::string& jobSecret);

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
