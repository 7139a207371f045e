// TcpStore: the rendezvous store of multi-process jobs. One rank runs the server (one
// listener thread, "strata-store"); every rank, the server's included, talks to it
// through a client socket.
//
// Wire protocol (host byte order, little-endian only; one request in flight per client):
//   request: u32 bodyBytes | u8 command | u32 keyBytes | key | argument
//            kSet: the value   kGet: u64 wait in ms   kAdd: i64 delta   kCheck: nothing
//   reply:   u8 status | u64 payloadBytes | payload
//            kSet: nothing     kGet: the value, or status kTimeout once the wait expired
//            kAdd: i64 result  kCheck: u8 0 or 1
// A get of a missing key parks the request in the server's waiter list; the server keeps
// serving other clients and answers the waiter when the key is set or its wait expires.
//
// Deadline-bounded socket I/O comes from core/socket.h (shared with the TCP transport).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "bootstrap/store.h"
#include "core/errors.h"
#include "core/logging.h"
#include "core/socket.h"

namespace strata::bootstrap {
namespace {

using net::errnoText;
using net::IoStatus;
using net::pollUntil;
using net::recvAll;
using net::remainingMs;
using net::sendAll;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the store protocol is little-endian");

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

enum class Command : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kCheck = 4 };
enum class Status : uint8_t { kOk = 0, kTimeout = 1, kBadRequest = 2 };

// Keys are short names ("tcp/addr/3"); the bound only stops a confused client early.
constexpr size_t kMaxKeyBytes = 64 * 1024;
// Values are addresses and small blobs; bounds what one bad client can make us allocate.
constexpr size_t kMaxBodyBytes = size_t{256} << 20;
constexpr size_t kRequestPrefixBytes = 4;    // u32 bodyBytes
constexpr size_t kRequestHeadBytes = 1 + 4;  // command + keyBytes
constexpr size_t kReplyHeadBytes = 1 + 8;    // status + payloadBytes
// The server answers an expired get at its deadline; this covers scheduling delays.
constexpr milliseconds kGetReplyGrace{5000};
// Connect retries back off from 10 ms to 1 s: fast when the server is just starting,
// gentle on a server that is still far away.
constexpr milliseconds kMinBackoff{10};
constexpr milliseconds kMaxBackoff{1000};
// Every rank of a large job may connect at once.
constexpr int kListenBacklog = 1024;
constexpr size_t kReadChunkBytes = 64 * 1024;
// Caps a client's requested wait so the deadline arithmetic cannot overflow.
constexpr milliseconds kMaxWait = std::chrono::hours(24 * 365);

void putU32(Bytes& out, uint32_t v) {
  out.insert(out.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 4);
}
void putU64(Bytes& out, uint64_t v) {
  out.insert(out.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 8);
}
uint32_t loadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t loadU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// One connection attempt to any address of host:port, bounded by the deadline.
// Returns the connected (non-blocking) socket, or -1 with *why set.
int connectOnce(const std::string& host, uint16_t port, Clock::time_point deadline,
                std::string* why) {
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

// Listens on every interface: dual-stack IPv6 when available, else IPv4.
int listenAnyInterface(uint16_t port, int* err) {
  for (const int family : {AF_INET6, AF_INET}) {
    const int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      *err = errno;
      continue;
    }
    const int one = 1;
    const int zero = 0;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_storage addr{};
    socklen_t len = 0;
    if (family == AF_INET6) {
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
      auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
      a6->sin6_family = AF_INET6;
      a6->sin6_addr = in6addr_any;
      a6->sin6_port = htons(port);
      len = sizeof(*a6);
    } else {
      auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
      a4->sin_family = AF_INET;
      a4->sin_addr.s_addr = htonl(INADDR_ANY);
      a4->sin_port = htons(port);
      len = sizeof(*a4);
    }
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
        ::listen(fd, kListenBacklog) == 0) {
      return fd;
    }
    *err = errno;
    ::close(fd);
  }
  return -1;
}

uint16_t boundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

// ---------------------------------------------------------------------------------------
// The server. Threading: the constructor and destructor run on the owner's thread; all
// other state is touched only by the listener thread, so it needs no lock.
class StoreServer {
 public:
  explicit StoreServer(uint16_t requestedPort) {
    int err = 0;
    listenFd_ = listenAnyInterface(requestedPort, &err);
    if (listenFd_ < 0) {
      STRATA_THROW(StoreError, "TcpStore server cannot listen on port ", requestedPort, ": ",
                   errnoText(err));
    }
    port_ = boundPort(listenFd_);
    wakeFd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wakeFd_ < 0) {
      err = errno;
      ::close(listenFd_);
      STRATA_THROW(StoreError, "TcpStore server on port ", port_,
                   ": eventfd failed: ", errnoText(err));
    }
    thread_ = std::thread([this] { run(); });
  }

  ~StoreServer() {
    stop_.store(true);
    const uint64_t one = 1;
    if (::write(wakeFd_, &one, sizeof(one)) < 0) { /* the poll timeout still sees stop_ */
    }
    thread_.join();
    for (auto& entry : clients_) ::close(entry.first);
    ::close(listenFd_);
    ::close(wakeFd_);
  }

  uint16_t port() const { return port_; }

 private:
  struct Client {
    Bytes in;   // bytes received, not yet parsed
    Bytes out;  // reply bytes not yet sent
    size_t outSent = 0;
    bool waiting = false;  // a get is parked; later requests wait behind it
  };
  struct Waiter {
    int fd;
    std::string key;
    Clock::time_point deadline;
  };

  // Wakes at least this often, to expire waiters without a timer structure.
  static constexpr milliseconds kMaxPollSleep{1000};

  void run() {
    pthread_setname_np(pthread_self(), "strata-store");
    try {
      while (!stop_.load()) serveOnce();
    } catch (const std::exception& e) {
      STRATA_LOG(kError, kNet, "TcpStore server on port ", port_, " stopped: ", e.what());
    }
  }

  void serveOnce() {
    std::vector<pollfd> fds{{listenFd_, POLLIN, 0}, {wakeFd_, POLLIN, 0}};
    for (auto& [fd, client] : clients_) {
      const bool wantsOut = client.outSent < client.out.size();
      fds.push_back({fd, static_cast<short>(POLLIN | (wantsOut ? POLLOUT : 0)), 0});
    }
    const int rc = ::poll(fds.data(), fds.size(), pollTimeoutMs());
    if (rc < 0 && errno != EINTR)
      STRATA_THROW(StoreError, "TcpStore server poll: ", errnoText(errno));
    if (rc > 0) {
      if (fds[0].revents != 0) acceptClients();
      for (size_t i = 2; i < fds.size(); ++i) {
        if (fds[i].revents != 0) serveClient(fds[i].fd, fds[i].revents);
      }
    }
    expireWaiters();
  }

  int pollTimeoutMs() const {
    auto deadline = Clock::now() + kMaxPollSleep;
    for (const Waiter& w : waiters_) deadline = std::min(deadline, w.deadline);
    return remainingMs(deadline) + 1;  // +1: wake just after, not just before, a deadline
  }

  void acceptClients() {
    for (;;) {
      const int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or a transient error; the next poll retries
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      clients_[fd];
    }
  }

  void serveClient(int fd, short revents) {
    auto it = clients_.find(fd);
    if (it == clients_.end()) return;  // dropped earlier in this round
    Client& client = it->second;
    bool alive = true;
    if (revents & (POLLIN | POLLHUP | POLLERR)) alive = readClient(fd, client);
    if (alive) alive = handleRequests(fd, client);
    if (alive) alive = flush(fd, client);
    if (!alive) dropClient(fd);
  }

  // Returns false when the client went away (a normal event: ranks exit).
  bool readClient(int fd, Client& client) {
    uint8_t chunk[kReadChunkBytes];
    for (;;) {
      const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n > 0) {
        client.in.insert(client.in.end(), chunk, chunk + n);
      } else if (n == 0) {
        return false;
      } else {
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      }
    }
  }

  // Handles every complete request in the input buffer, stopping behind a parked get.
  bool handleRequests(int fd, Client& client) {
    size_t offset = 0;
    while (!client.waiting && client.in.size() - offset >= kRequestPrefixBytes) {
      const size_t bodyBytes = loadU32(client.in.data() + offset);
      if (bodyBytes < kRequestHeadBytes || bodyBytes > kMaxBodyBytes) return false;
      if (client.in.size() - offset - kRequestPrefixBytes < bodyBytes) break;
      const uint8_t* body = client.in.data() + offset + kRequestPrefixBytes;
      offset += kRequestPrefixBytes + bodyBytes;
      const size_t keyBytes = loadU32(body + 1);
      if (keyBytes > kMaxKeyBytes || keyBytes > bodyBytes - kRequestHeadBytes) return false;
      const std::string key(reinterpret_cast<const char*>(body) + kRequestHeadBytes, keyBytes);
      const uint8_t* arg = body + kRequestHeadBytes + keyBytes;
      handle(fd, client, static_cast<Command>(body[0]), key, arg,
             bodyBytes - kRequestHeadBytes - keyBytes);
    }
    client.in.erase(client.in.begin(), client.in.begin() + static_cast<ptrdiff_t>(offset));
    return true;
  }

  void handle(int fd, Client& client, Command command, const std::string& key, const uint8_t* arg,
              size_t argBytes) {
    switch (command) {
      case Command::kSet:
        data_[key].assign(arg, arg + argBytes);
        reply(client, Status::kOk, nullptr, 0);
        wakeWaiters(key);
        return;
      case Command::kGet:
        if (argBytes != 8) break;
        if (data_.count(key) != 0) {
          reply(client, Status::kOk, data_[key].data(), data_[key].size());
        } else {
          client.waiting = true;
          const auto wait = milliseconds(std::min<uint64_t>(loadU64(arg), kMaxWait.count()));
          waiters_.push_back({fd, key, Clock::now() + wait});
        }
        return;
      case Command::kAdd: {
        if (argBytes != 8) break;
        int64_t value = static_cast<int64_t>(loadU64(arg)) + decodeCounter(data_[key]);
        const std::string text = std::to_string(value);
        data_[key].assign(text.begin(), text.end());
        reply(client, Status::kOk, reinterpret_cast<const uint8_t*>(&value), sizeof(value));
        wakeWaiters(key);
        return;
      }
      case Command::kCheck: {
        const uint8_t found = data_.count(key) != 0 ? 1 : 0;
        reply(client, Status::kOk, &found, 1);
        return;
      }
    }
    reply(client, Status::kBadRequest, nullptr, 0);
  }

  // Counters are decimal text (as in HashStore); a non-number counts as 0.
  static int64_t decodeCounter(const Bytes& value) {
    return value.empty()
               ? 0
               : std::strtoll(std::string(value.begin(), value.end()).c_str(), nullptr, 10);
  }

  static void reply(Client& client, Status status, const uint8_t* payload, size_t numBytes) {
    client.out.push_back(static_cast<uint8_t>(status));
    putU64(client.out, numBytes);
    if (numBytes > 0) client.out.insert(client.out.end(), payload, payload + numBytes);
  }

  // Sends what the socket takes now; the rest goes on POLLOUT. False on a dead client.
  static bool flush(int fd, Client& client) {
    while (client.outSent < client.out.size()) {
      const ssize_t n = ::send(fd, client.out.data() + client.outSent,
                               client.out.size() - client.outSent, MSG_NOSIGNAL);
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      client.outSent += static_cast<size_t>(n);
    }
    client.out.clear();
    client.outSent = 0;
    return true;
  }

  void wakeWaiters(const std::string& key) {
    finishWaiters([&](const Waiter& w) { return w.key == key; }, Status::kOk);
  }

  void expireWaiters() {
    const auto now = Clock::now();
    finishWaiters([&](const Waiter& w) { return w.deadline <= now; }, Status::kTimeout);
  }

  template <typename Pred>
  void finishWaiters(Pred matches, Status status) {
    std::vector<int> woken;
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (!matches(*it)) {
        ++it;
        continue;
      }
      Client& client = clients_.at(it->fd);
      const Bytes* value = status == Status::kOk ? &data_[it->key] : nullptr;
      reply(client, status, value ? value->data() : nullptr, value ? value->size() : 0);
      client.waiting = false;
      woken.push_back(it->fd);
      it = waiters_.erase(it);
    }
    for (const int fd : woken) {
      auto client = clients_.find(fd);
      if (client == clients_.end()) continue;
      if (!handleRequests(fd, client->second) || !flush(fd, client->second)) dropClient(fd);
    }
  }

  void dropClient(int fd) {
    waiters_.erase(std::remove_if(waiters_.begin(), waiters_.end(),
                                  [fd](const Waiter& w) { return w.fd == fd; }),
                   waiters_.end());
    clients_.erase(fd);
    ::close(fd);
  }

  int listenFd_ = -1;
  int wakeFd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::map<int, Client> clients_;
  std::vector<Waiter> waiters_;
  std::map<std::string, Bytes> data_;
  std::thread thread_;  // last: starts after every member above is initialised
};

// ---------------------------------------------------------------------------------------
// The client. Thread-safe: one mutex serialises request/response pairs on the one socket,
// so a thread blocked in get() holds up this client's other callers (not other clients).
// After an I/O error the socket is dropped and the next call reconnects.
class TcpStoreImpl final : public TcpStore {
 public:
  TcpStoreImpl(std::string host, uint16_t port, bool isServer, milliseconds timeout)
      : host_(std::move(host)), port_(port), timeout_(timeout) {
    if (isServer) {
      server_ = std::make_unique<StoreServer>(port);
      port_ = server_->port();
      STRATA_LOG(kInfo, kNet, "TcpStore server listening on port ", port_);
    }
    std::lock_guard<std::mutex> lock(mu_);
    ensureConnected();
  }

  ~TcpStoreImpl() override {
    if (fd_ >= 0) ::close(fd_);
  }

  uint16_t port() const override { return port_; }

  void set(const std::string& key, const Bytes& value) override {
    request(Command::kSet, key, value, timeout_, "set");
  }

  Bytes get(const std::string& key, milliseconds timeout) override {
    Bytes arg;
    putU64(arg, static_cast<uint64_t>(std::max<int64_t>(timeout.count(), 0)));
    Status status = Status::kOk;
    Bytes value = request(Command::kGet, key, arg, timeout + kGetReplyGrace, "get", &status);
    if (status == Status::kTimeout) {
      STRATA_THROW(TimeoutError, "TcpStore ", address(), " get(\"", key, "\") timed out after ",
                   timeout.count(), " ms: the key was never set");
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
  std::string address() const { return host_ + ":" + std::to_string(port_); }

  [[noreturn]] void failProtocol(const char* op, const std::string& key, size_t numBytes) {
    STRATA_THROW(StoreError, "TcpStore ", address(), " ", op, "(\"", key,
                 "\"): malformed reply of ", numBytes, " bytes");
  }

  // Connects (retrying with backoff) unless connected. Requires mu_.
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
      if (fd_ >= 0) return;
      if (Clock::now() + backoff >= deadline) break;
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
    const auto waited = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
    STRATA_THROW(StoreError, "TcpStore cannot connect to ", address(), " after ", attempts,
                 " attempts in ", waited, " ms: ", why);
  }

  Bytes request(Command command, const std::string& key, const Bytes& arg,
                milliseconds replyTimeout, const char* op, Status* statusOut = nullptr) {
    if (key.size() > kMaxKeyBytes || kRequestHeadBytes + key.size() + arg.size() > kMaxBodyBytes) {
      STRATA_THROW(StoreError, "TcpStore ", address(), " ", op, ": key of ", key.size(),
                   " bytes or value of ", arg.size(), " bytes exceeds the protocol limit");
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
      STRATA_THROW(StoreError, "TcpStore ", address(), " rejected ", op, "(\"", key,
                   "\") as malformed");
    }
    if (statusOut != nullptr) *statusOut = status;
    return payload;
  }

  // Drops the socket (the stream is out of step) and throws. Requires mu_.
  [[noreturn]] void failIo(const char* op, const std::string& key, IoStatus io, int err) {
    ::close(fd_);
    fd_ = -1;
    const std::string why = io == IoStatus::kTimeout ? std::string("no reply in time")
                            : io == IoStatus::kClosed
                                ? std::string("the server closed the connection")
                                : errnoText(err);
    STRATA_THROW(StoreError, "TcpStore ", address(), " ", op, "(\"", key, "\") failed: ", why);
  }

  std::unique_ptr<StoreServer> server_;  // first: destroyed after the client socket
  const std::string host_;
  uint16_t port_;
  const milliseconds timeout_;
  std::mutex mu_;
  int fd_ = -1;  // guarded by mu_
};

}  // namespace

std::shared_ptr<TcpStore> TcpStore::create(const std::string& host, uint16_t port, bool isServer,
                                           std::chrono::milliseconds timeout) {
  return std::make_shared<TcpStoreImpl>(host, port, isServer, timeout);
}

}  // namespace strata::bootstrap
