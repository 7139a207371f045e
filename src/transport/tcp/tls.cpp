#include "transport/tcp/tls.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/auth.h"
#include "core/errors.h"
#include "core/sigpipe_guard.h"

namespace strata::transport::tcp {
namespace {

constexpr char kPskIdentity[] = "strata";
// AES-GCM first (hardware AES on x86), ChaCha20 for CPUs without it.
constexpr char kCipherList[] = "PSK-AES128-GCM-SHA256:PSK-CHACHA20-POLY1305";
// One SSL call moves at most this much (SSL_write_ex takes size_t, but keep calls short).
constexpr size_t kMaxTlsIoBytes = size_t{1} << 30;

std::string sslErrorText() {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof(buf));
    text += (text.empty() ? "" : "; ") + std::string(buf);
  }
  return text.empty() ? "unknown TLS error" : text;
}

}  // namespace

// The PSK callbacks find their session through the SSL's app data.
struct TlsCallbacks {
  static unsigned int copyPsk(SSL* ssl, unsigned char* psk, unsigned int maxPsk) {
    const auto* session = static_cast<const TlsSession*>(SSL_get_app_data(ssl));
    if (session == nullptr || maxPsk < kPskBytes) return 0;
    std::memcpy(psk, session->psk_.data(), kPskBytes);
    return static_cast<unsigned int>(kPskBytes);
  }
  static unsigned int client(SSL* ssl, const char* /*hint*/, char* identity, unsigned int maxIdentity,
                             unsigned char* psk, unsigned int maxPsk) {
    if (maxIdentity < sizeof(kPskIdentity)) return 0;
    std::memcpy(identity, kPskIdentity, sizeof(kPskIdentity));
    return copyPsk(ssl, psk, maxPsk);
  }
  static unsigned int server(SSL* ssl, const char* identity, unsigned char* psk, unsigned int maxPsk) {
    if (identity == nullptr || std::strcmp(identity, kPskIdentity) != 0) return 0;
    return copyPsk(ssl, psk, maxPsk);
  }
};

namespace {

SSL_CTX* makeContext(bool isServer) {
  SSL_CTX* ctx = SSL_CTX_new(isServer ? TLS_server_method() : TLS_client_method());
  STRATA_CHECK(ctx != nullptr, "TLS: creating an OpenSSL context failed: ", sslErrorText());
  // PSK cipher suites are TLS 1.2 ones; 1.3 would need its own PSK session setup.
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
  STRATA_CHECK(SSL_CTX_set_cipher_list(ctx, kCipherList) == 1,
               "TLS: OpenSSL rejected the cipher list ", kCipherList, ": ", sslErrorText());
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                               SSL_OP_IGNORE_UNEXPECTED_EOF);
  // Partial writes let the connection count bytes as they go; the retried buffer of a
  // message may sit at another address (the coalesced header is rebuilt on each try).
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_read_ahead(ctx, 1);  // fewer read syscalls per record
  if (isServer) {
    SSL_CTX_set_psk_server_callback(ctx, &TlsCallbacks::server);
  } else {
    SSL_CTX_set_psk_client_callback(ctx, &TlsCallbacks::client);
  }
  return ctx;
}

// One context per role for the process (thread-safe static init; SSL_CTX is
// thread-safe once set up).
SSL_CTX* contextFor(bool isServer) {
  static SSL_CTX* const server = makeContext(true);
  static SSL_CTX* const client = makeContext(false);
  return isServer ? server : client;
}

}  // namespace

std::array<uint8_t, kPskBytes> derivePsk(const std::string& secret) {
  return auth::deriveKey(secret, auth::KeyUse::kTlsPsk);
}

void checkTlsOptions(bool encrypt, const std::string& jobSecret) {
  STRATA_CHECK_WITH(ConfigError, !encrypt || !jobSecret.empty(),
                    "encrypting traffic between hosts (security.encrypt_inter_node_traffic or STRATA_TLS=1) needs "
                    "a job secret to derive the TLS key from: set STRATA_JOB_SECRET, STRATA_JOB_SECRET_FILE or "
                    "security.job_secret_file (the same on every rank; see docs/security.md)");
}

TlsSession::TlsSession(ssl_st* ssl, int fd, const std::string& secret)
    : ssl_(ssl), fd_(fd), psk_(derivePsk(secret)) {}

TlsSession::~TlsSession() { SSL_free(ssl_); }

std::unique_ptr<TlsSession> TlsSession::handshake(int fd, bool isServer, const std::string& secret,
                                                  Clock::time_point deadline, std::string* why) {
  checkTlsOptions(true, secret);
  SSL* ssl = SSL_new(contextFor(isServer));
  STRATA_CHECK(ssl != nullptr, "TLS: SSL_new failed: ", sslErrorText());
  std::unique_ptr<TlsSession> session(new TlsSession(ssl, fd, secret));
  SSL_set_app_data(ssl, session.get());
  setNonBlocking(fd);
  STRATA_CHECK(SSL_set_fd(ssl, fd) == 1, "TLS: SSL_set_fd failed: ", sslErrorText());
  if (isServer) {
    SSL_set_accept_state(ssl);
  } else {
    SSL_set_connect_state(ssl);
  }
  std::lock_guard<std::mutex> lock(session->mu_);
  while (true) {
    ERR_clear_error();
    const SigpipeGuard noSigpipe;  // the handshake writes through OpenSSL's socket BIO
    const int ret = SSL_do_handshake(ssl);
    if (ret == 1) return session;
    const int err = SSL_get_error(ssl, ret);
    short events = 0;
    if (err == SSL_ERROR_WANT_READ) events = POLLIN;
    if (err == SSL_ERROR_WANT_WRITE) events = POLLOUT;
    if (events == 0) {
      session->classify(ret, why);
      *why = "TLS handshake failed: " + *why;
      return nullptr;
    }
    if (!pollUntil(fd, events, deadline)) {
      *why = "TLS handshake timed out";
      return nullptr;
    }
  }
}

TlsStatus TlsSession::classify(int ret, std::string* why) {
  const int err = SSL_get_error(ssl_, ret);
  switch (err) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE: return TlsStatus::kWantIo;
    case SSL_ERROR_ZERO_RETURN:
      *why = "end of stream";
      return TlsStatus::kClosed;
    case SSL_ERROR_SYSCALL: {
      const int sysErr = errno;
      const std::string queued = sslErrorText();
      if (sysErr == 0 || sysErr == EPIPE || sysErr == ECONNRESET) {
        *why = sysErr == 0 ? "end of stream" : errnoText(sysErr);
        return TlsStatus::kClosed;
      }
      *why = errnoText(sysErr) + (queued == "unknown TLS error" ? "" : " (" + queued + ")");
      return TlsStatus::kError;
    }
    default:
      *why = sslErrorText();
      return TlsStatus::kError;
  }
}

TlsStatus TlsSession::write(const void* data, size_t numBytes, size_t* moved, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  ERR_clear_error();
  errno = 0;
  size_t n = 0;
  const SigpipeGuard noSigpipe;  // a peer that has gone: EPIPE, not the end of the process
  const int ret = SSL_write_ex(ssl_, data, std::min(numBytes, kMaxTlsIoBytes), &n);
  if (ret == 1) {
    writePending_ = false;
    *moved = n;
    return TlsStatus::kOk;
  }
  const TlsStatus status = classify(ret, why);
  writePending_ = status == TlsStatus::kWantIo;
  return status;
}

TlsStatus TlsSession::read(void* data, size_t numBytes, size_t* moved, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  ERR_clear_error();
  errno = 0;
  size_t n = 0;
  const SigpipeGuard noSigpipe;  // SSL_read may write an alert
  const int ret = SSL_read_ex(ssl_, data, std::min(numBytes, kMaxTlsIoBytes), &n);
  if (ret == 1) {
    *moved = n;
    return TlsStatus::kOk;
  }
  return classify(ret, why);
}

bool TlsSession::writePending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writePending_;
}

std::string TlsSession::description() const {
  std::lock_guard<std::mutex> lock(mu_);
  const char* cipher = SSL_get_cipher_name(ssl_);
  return std::string(SSL_get_version(ssl_)) + " " + (cipher != nullptr ? cipher : "?");
}

namespace {

// Moves all `numBytes` with `step` (one TLS write or read: its status and *moved), waiting on
// the socket for `events` while TLS wants I/O, until `deadline`.
template <typename Step>
IoStatus moveAll(int fd, short events, size_t numBytes, Clock::time_point deadline, Step step) {
  size_t done = 0;
  while (done < numBytes) {
    size_t n = 0;
    const TlsStatus status = step(done, &n);
    if (status == TlsStatus::kClosed) return IoStatus::kClosed;
    if (status == TlsStatus::kError) return IoStatus::kError;
    if (status == TlsStatus::kWantIo) {
      if (!pollUntil(fd, events, deadline)) return IoStatus::kTimeout;
      continue;
    }
    done += n;
  }
  return IoStatus::kOk;
}

}  // namespace

IoStatus TlsSession::sendAll(const void* data, size_t numBytes, Clock::time_point deadline,
                             std::string* why) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  // No renegotiation: a write only ever waits to write.
  return moveAll(fd_, POLLOUT, numBytes, deadline,
                 [&](size_t done, size_t* n) { return write(bytes + done, numBytes - done, n, why); });
}

IoStatus TlsSession::recvAll(void* data, size_t numBytes, Clock::time_point deadline,
                             std::string* why) {
  auto* bytes = static_cast<uint8_t*>(data);
  return moveAll(fd_, POLLIN, numBytes, deadline,
                 [&](size_t done, size_t* n) { return read(bytes + done, numBytes - done, n, why); });
}

}  // namespace strata::transport::tcp
