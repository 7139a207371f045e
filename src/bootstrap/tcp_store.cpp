// TcpStore: the rendezvous store of multi-process jobs. One rank runs the server
// (tcp_store_server.h); every rank, the server's included, talks to it through the client
// below. Each connection starts with the authentication step (store_auth.h), then carries
// requests (tcp_store_protocol.h). Deadline-bounded socket I/O comes from core/socket.h.
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <thread>

#include "bootstrap/store.h"
#include "bootstrap/store_auth.h"
#include "bootstrap/tcp_store_protocol.h"
#include "bootstrap/tcp_store_server.h"
#include "core/errors.h"
#include "core/logging.h"
#include "core/socket.h"

namespace strata::bootstrap {
namespace {

using namespace detail;  // NOLINT: the protocol's names
using net::errnoText;
using net::IoStatus;
using net::pollUntil;
using net::recvAll;
using net::sendAll;

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The server answers an expired get at its deadline; this covers scheduling delays.
constexpr milliseconds kGetReplyGrace{5000};
// Connect retries back off from 10 ms to 1 s: fast when the server is just starting,
// gentle on a server that is still far away.
constexpr milliseconds kMinBackoff{10};
constexpr milliseconds kMaxBackoff{1000};

// One connection attempt to any address of host:port, bounded by the deadline.
// Returns the connected (non-blocking) socket, or -1 with *why set.
int connectOnce(const std::string& host, uint16_t port, Clock::time_point deadline, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  if (rc != 0) {
    *why = std::string("cannot resolve host: ") + ::gai_strerror(rc);
    return -1;
  }
  int result = -1;
  for (addrinfo* ai = list; ai != nullptr && result < 0; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      *why = errnoText(errno);
      continue;
    }
    int soError = 0;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) soError = errno;
    if (soError == EINPROGRESS) {
      socklen_t len = sizeof(soError);
      soError = pollUntil(fd, POLLOUT, deadline) ? 0 : ETIMEDOUT;
      if (soError == 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &len);
    }
    if (soError == 0) {
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      result = fd;
    } else {
      *why = errnoText(soError);
      ::close(fd);
    }
  }
  ::freeaddrinfo(list);
  return result;
}

const char* const kSecretHint =
    "Every rank needs the same job secret (STRATA_JOB_SECRET, STRATA_JOB_SECRET_FILE or security.job_secret_file; "
    "see docs/security.md)";

// How the authentication step on a fresh connection ended.
enum class AuthOutcome { kOk, kIoFailed, kRefused, kServerUnproven };

// The client's part of the authentication step (store_auth.h) on a connected socket.
AuthOutcome authenticate(int fd, const auth::Key& key, int rank, Clock::time_point deadline, std::string* why) {
  int err = 0;
  uint8_t hello[kServerHelloBytes];
  IoStatus io = recvAll(fd, hello, sizeof(hello), deadline, &err);
  auth::Nonce serverNonce{};
  if (io == IoStatus::kOk && !decodeServerHello(hello, sizeof(hello), &serverNonce)) {
    *why = "the server did not start the strata store authentication (another program on that port?)";
    return AuthOutcome::kServerUnproven;
  }
  const ClientProof proof = makeClientProof(key, rank, serverNonce);
  const Bytes message = encodeClientProof(proof);
  if (io == IoStatus::kOk) io = sendAll(fd, message.data(), message.size(), deadline, &err);
  uint8_t verdict[kVerdictAcceptedBytes];
  if (io == IoStatus::kOk) io = recvAll(fd, verdict, 1, deadline, &err);
  if (io == IoStatus::kOk && verdict[0] == static_cast<uint8_t>(AuthVerdict::kAccepted))
    io = recvAll(fd, verdict + 1, auth::kMacBytes, deadline, &err);
  if (io != IoStatus::kOk) {
    *why = std::string("authenticating: ") + net::ioStatusText(io) + (err != 0 ? " " + errnoText(err) : "");
    return AuthOutcome::kIoFailed;
  }
  const auto status = static_cast<AuthVerdict>(verdict[0]);
  if (status != AuthVerdict::kAccepted) {
    *why = std::string("the server refused our proof of the job secret: ") + authVerdictText(status);
    return AuthOutcome::kRefused;
  }
  auth::Mac serverMac{};
  std::copy(verdict + 1, verdict + kVerdictAcceptedBytes, serverMac.begin());
  if (!serverProofValid(key, serverNonce, proof, serverMac)) {
    *why = "the server could not prove it holds the job secret (not this job's store)";
    return AuthOutcome::kServerUnproven;
  }
  return AuthOutcome::kOk;
}

// The client. Thread-safe: one mutex serialises request/response pairs on the one socket,
// so a thread blocked in get() holds up this client's other callers (not other clients).
// After an I/O error the socket is dropped and the next call reconnects (and
// authenticates again).
class TcpStoreImpl final : public TcpStore {
 public:
  explicit TcpStoreImpl(const TcpStoreOptions& o)
      : key_(auth::deriveKey(o.secret, auth::KeyUse::kStoreAuth)),
        host_(o.host),
        port_(o.port),
        timeout_(o.timeout),
        rank_(o.rank) {
    if (o.isServer) {
      server_ = std::make_unique<StoreServer>(o.bindHost.empty() ? o.host : o.bindHost, o.port, o.secret);
      port_ = server_->port();
      STRATA_LOG(kInfo, kNet, "TcpStore server listening on ", server_->listenAddress(),
                 o.secret.empty() ? " (no job secret: unauthenticated)" : " (clients must prove the job secret)");
    }
    std::lock_guard<std::mutex> lock(mu_);
    ensureConnected();
  }

  ~TcpStoreImpl() override {
    if (fd_ >= 0) ::close(fd_);
  }

  uint16_t port() const override { return port_; }

  void set(const std::string& key, const Bytes& value) override { request(Command::kSet, key, value, timeout_, "set"); }

  Bytes get(const std::string& key, milliseconds timeout) override {
    Bytes arg;
    putU64(arg, static_cast<uint64_t>(std::max<int64_t>(timeout.count(), 0)));
    Status status = Status::kOk;
    Bytes value = request(Command::kGet, key, arg, timeout + kGetReplyGrace, "get", &status);
    if (status == Status::kTimeout) {
      STRATA_THROW(TimeoutError, "TcpStore ", address(), " get(\"", key, "\") timed out after ", timeout.count(),
                   " ms: the key was never set");
    }
    return value;
  }

  int64_t add(const std::string& key, int64_t delta) override {
    Bytes arg;
    putU64(arg, static_cast<uint64_t>(delta));
    const Bytes reply = request(Command::kAdd, key, arg, timeout_, "add");
    if (reply.size() != 8) failProtocol("add", key, reply.size());
    return static_cast<int64_t>(loadU64(reply.data()));
  }

  bool check(const std::string& key) override {
    const Bytes reply = request(Command::kCheck, key, {}, timeout_, "check");
    if (reply.size() != 1) failProtocol("check", key, reply.size());
    return reply[0] != 0;
  }

 private:
  std::string address() const { return net::formatHostPort(host_, port_); }

  [[noreturn]] void failProtocol(const char* op, const std::string& key, size_t numBytes) {
    STRATA_THROW(StoreError, "TcpStore ", address(), " ", op, "(\"", key, "\"): malformed reply of ", numBytes,
                 " bytes");
  }

  // Connects and authenticates (retrying connection failures with backoff) unless
  // connected. A refusal is final (ConfigError: retrying with the same secret cannot
  // help), and so is a server that cannot prove the secret (StoreError). Requires mu_.
  void ensureConnected() {
    if (fd_ >= 0) return;
    const auto start = Clock::now();
    const auto deadline = start + timeout_;
    milliseconds backoff = kMinBackoff;
    int attempts = 0;
    std::string why;
    for (;;) {
      ++attempts;
      fd_ = connectOnce(host_, port_, deadline, &why);
      if (fd_ >= 0) {
        const AuthOutcome outcome = authenticate(fd_, key_, rank_, deadline, &why);
        if (outcome == AuthOutcome::kOk) return;
        ::close(fd_);
        fd_ = -1;
        // A refused proof is a configuration problem (a retry fails the same way): ConfigError.
        if (outcome == AuthOutcome::kRefused) {
          STRATA_THROW(ConfigError, "TcpStore ", address(), ": ", why, ". ", kSecretHint);
        }
        if (outcome == AuthOutcome::kServerUnproven) STRATA_THROW(StoreError, "TcpStore ", address(), ": ", why);
      }
      if (Clock::now() + backoff >= deadline) break;
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
    const auto waited = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
    STRATA_THROW(StoreError, "TcpStore cannot connect to ", address(), " after ", attempts, " attempts in ", waited,
                 " ms: ", why);
  }

  Bytes request(Command command, const std::string& key, const Bytes& arg, milliseconds replyTimeout,
                const char* op, Status* statusOut = nullptr) {
    if (key.size() > kMaxKeyBytes || kRequestHeadBytes + key.size() + arg.size() > kMaxBodyBytes) {
      STRATA_THROW(StoreError, "TcpStore ", address(), " ", op, ": key of ", key.size(), " bytes or value of ",
                   arg.size(), " bytes exceeds the protocol limit");
    }
    Bytes frame;
    frame.reserve(kRequestPrefixBytes + kRequestHeadBytes + key.size() + arg.size());
    putU32(frame, static_cast<uint32_t>(kRequestHeadBytes + key.size() + arg.size()));
    frame.push_back(static_cast<uint8_t>(command));
    putU32(frame, static_cast<uint32_t>(key.size()));
    frame.insert(frame.end(), key.begin(), key.end());
    frame.insert(frame.end(), arg.begin(), arg.end());

    std::lock_guard<std::mutex> lock(mu_);
    ensureConnected();
    int err = 0;
    IoStatus io = sendAll(fd_, frame.data(), frame.size(), Clock::now() + timeout_, &err);
    uint8_t head[kReplyHeadBytes];
    const auto replyDeadline = Clock::now() + replyTimeout;
    if (io == IoStatus::kOk) io = recvAll(fd_, head, sizeof(head), replyDeadline, &err);
    Bytes payload;
    if (io == IoStatus::kOk) {
      const uint64_t numBytes = loadU64(head + 1);
      if (numBytes > kMaxBodyBytes) failIo(op, key, IoStatus::kError, EPROTO);
      payload.resize(numBytes);
      io = recvAll(fd_, payload.data(), payload.size(), replyDeadline, &err);
    }
    if (io != IoStatus::kOk) failIo(op, key, io, err);
    const auto status = static_cast<Status>(head[0]);
    if (status == Status::kBadRequest) {
      STRATA_THROW(StoreError, "TcpStore ", address(), " rejected ", op, "(\"", key, "\") as malformed");
    }
    if (statusOut != nullptr) *statusOut = status;
    return payload;
  }

  // Drops the socket (the stream is out of step) and throws. Requires mu_.
  [[noreturn]] void failIo(const char* op, const std::string& key, IoStatus io, int err) {
    ::close(fd_);
    fd_ = -1;
    const std::string why = io == IoStatus::kTimeout  ? std::string("no reply in time")
                            : io == IoStatus::kClosed ? std::string("the server closed the connection")
                                                      : errnoText(err);
    STRATA_THROW(StoreError, "TcpStore ", address(), " ", op, "(\"", key, "\") failed: ", why);
  }

  std::unique_ptr<StoreServer> server_;  // first: destroyed after the client socket
  const auth::Key key_;
  const std::string host_;
  uint16_t port_;
  const milliseconds timeout_;
  const int rank_;
  std::mutex mu_;
  int fd_ = -1;  // guarded by mu_
};

}  // namespace

std::shared_ptr<TcpStore> TcpStore::create(const TcpStoreOptions& options) {
  return std::make_shared<TcpStoreImpl>(options);
}

std::shared_ptr<TcpStore> TcpStore::create(const std::string& host, uint16_t port, bool isServer,
                                           std::chrono::milliseconds timeout) {
  TcpStoreOptions o;
  o.host = host;
  o.port = port;
  o.isServer = isServer;
  o.timeout = timeout;
  return create(o);
}

}  // namespace strata::bootstrap
