#include "bootstrap/tcp_store_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "core/errors.h"
#include "core/logging.h"
#include "core/socket.h"

namespace strata::bootstrap::detail {
namespace {

using net::errnoText;
using std::chrono::milliseconds;

// Every rank of a large job may connect at once.
constexpr int kListenBacklog = 1024;
constexpr size_t kReadChunkBytes = 64 * 1024;
// Caps a client's requested wait so the deadline arithmetic cannot overflow.
constexpr milliseconds kMaxWait = std::chrono::hours(24 * 365);
// Wakes at least this often, to expire waiters without a timer structure.
constexpr milliseconds kMaxPollSleep{1000};

bool isWildcard(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "*";
}

bool isLoopback(const sockaddr* addr) {
  if (addr->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr) >> 24) == 127;
  if (addr->sa_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr);
  return false;
}

// A listening socket on one address; -1 with *err set.
int bindAndListen(int family, const sockaddr* addr, socklen_t len, bool dualStack, int* err) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  const int one = 1;
  const int zero = 0;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (family == AF_INET6 && dualStack) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  if (::bind(fd, addr, len) == 0 && ::listen(fd, kListenBacklog) == 0) return fd;
  *err = errno;
  ::close(fd);
  return -1;
}

// Every interface: dual-stack IPv6 when available, else IPv4.
int listenAnyInterface(uint16_t port, int* err) {
  sockaddr_in6 a6{};
  a6.sin6_family = AF_INET6;
  a6.sin6_addr = in6addr_any;
  a6.sin6_port = htons(port);
  int fd = bindAndListen(AF_INET6, reinterpret_cast<sockaddr*>(&a6), sizeof(a6), true, err);
  if (fd >= 0) return fd;
  sockaddr_in a4{};
  a4.sin_family = AF_INET;
  a4.sin_addr.s_addr = htonl(INADDR_ANY);
  a4.sin_port = htons(port);
  return bindAndListen(AF_INET, reinterpret_cast<sockaddr*>(&a4), sizeof(a4), false, err);
}

// The addresses `host` resolves to, the first that binds. A name that resolves only to
// loopback addresses (Debian maps the hostname to 127.0.1.1) is reachable from this host
// only: said in a warning, as ranks of other hosts would time out without a clue.
int listenOnHost(const std::string& host, uint16_t port, int* err) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  if (rc != 0) {
    STRATA_THROW(StoreError, "TcpStore server cannot resolve its listen address \"", host,
                 "\": ", ::gai_strerror(rc));
  }
  int fd = -1;
  bool allLoopback = true;
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    allLoopback = allLoopback && isLoopback(ai->ai_addr);
    if (fd < 0) fd = bindAndListen(ai->ai_family, ai->ai_addr, ai->ai_addrlen, false, err);
  }
  ::freeaddrinfo(list);
  const bool loopbackName = host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
  if (fd >= 0 && allLoopback && !loopbackName) {
    STRATA_LOG(kWarn, kNet, "TcpStore: \"", host, "\" resolves to a loopback address on this host, so only ",
               "ranks of this host can reach the store; give an address of a network interface (or set ",
               "STRATA_STORE_BIND_ADDR) for a job over several hosts");
  }
  return fd;
}

}  // namespace

StoreServer::StoreServer(const std::string& bindHost, uint16_t requestedPort, const std::string& secret)
    : key_(auth::deriveKey(secret, auth::KeyUse::kStoreAuth)) {
  int err = 0;
  listenFd_ = isWildcard(bindHost) ? listenAnyInterface(requestedPort, &err)
                                   : listenOnHost(bindHost, requestedPort, &err);
  const std::string shown = isWildcard(bindHost) ? std::string("0.0.0.0") : bindHost;
  if (listenFd_ < 0) {
    STRATA_THROW(StoreError, "TcpStore server cannot listen on ", net::formatHostPort(shown, requestedPort),
                 ": ", errnoText(err),
                 err == EADDRNOTAVAIL ? " (not an address of this host: check MASTER_ADDR, or set "
                                        "STRATA_STORE_BIND_ADDR to a local address)"
                                      : "");
  }
  port_ = net::localPort(listenFd_);
  listenAddress_ = net::formatHostPort(shown, port_);
  wakeFd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeFd_ < 0) {
    err = errno;
    ::close(listenFd_);
    STRATA_THROW(StoreError, "TcpStore server on ", listenAddress_, ": eventfd failed: ", errnoText(err));
  }
  thread_ = std::thread([this] { run(); });
}

StoreServer::~StoreServer() {
  stop_.store(true);
  const uint64_t one = 1;
  if (::write(wakeFd_, &one, sizeof(one)) < 0) { /* the poll timeout still sees stop_ */
  }
  thread_.join();
  for (auto& entry : clients_) ::close(entry.first);
  ::close(listenFd_);
  ::close(wakeFd_);
}

void StoreServer::run() {
  pthread_setname_np(pthread_self(), "strata-store");
  try {
    while (!stop_.load()) serveOnce();
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kNet, "TcpStore server on ", listenAddress_, " stopped: ", e.what());
  }
}

void StoreServer::serveOnce() {
  std::vector<pollfd> fds{{listenFd_, POLLIN, 0}, {wakeFd_, POLLIN, 0}};
  for (auto& [fd, client] : clients_) {
    const bool wantsOut = client.outSent < client.out.size();
    fds.push_back({fd, static_cast<short>(POLLIN | (wantsOut ? POLLOUT : 0)), 0});
  }
  const int rc = ::poll(fds.data(), fds.size(), pollTimeoutMs());
  if (rc < 0 && errno != EINTR) STRATA_THROW(StoreError, "TcpStore server poll: ", errnoText(errno));
  if (rc > 0) {
    if (fds[0].revents != 0) acceptClients();
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents != 0) serveClient(fds[i].fd, fds[i].revents);
    }
  }
  expireWaiters();
  expireUnauthenticated();
}

int StoreServer::pollTimeoutMs() const {
  auto deadline = Clock::now() + kMaxPollSleep;
  for (const Waiter& w : waiters_) deadline = std::min(deadline, w.deadline);
  for (const auto& entry : clients_)
    if (!entry.second.authed) deadline = std::min(deadline, entry.second.authDeadline);
  return net::remainingMs(deadline) + 1;  // +1: wake just after, not just before, a deadline
}

void StoreServer::acceptClients() {
  for (;;) {
    const int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a transient error; the next poll retries
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    Client& client = clients_[fd];
    client.nonce = auth::freshNonce();
    client.out = encodeServerHello(client.nonce);
    client.authDeadline = Clock::now() + kAuthTimeout;
    client.address = net::peerAddress(fd);
    if (!flush(fd, client)) dropClient(fd);
  }
}

void StoreServer::serveClient(int fd, short revents) {
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;  // dropped earlier in this round
  Client& client = it->second;
  bool alive = true;
  if (revents & (POLLIN | POLLHUP | POLLERR)) alive = readClient(fd, client);
  if (alive && !client.closing) alive = handleRequests(fd, client);
  if (alive) alive = flush(fd, client);
  if (!alive || (client.closing && client.out.empty())) dropClient(fd);
}

// Returns false when the client went away (a normal event: ranks exit).
bool StoreServer::readClient(int fd, Client& client) {
  uint8_t chunk[kReadChunkBytes];
  for (;;) {
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n > 0) {
      if (!client.closing) client.in.insert(client.in.end(), chunk, chunk + n);
    } else if (n == 0) {
      return false;
    } else {
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    }
  }
}

// The authentication step: false while the proof is incomplete. A bad proof queues the
// refusal and marks the client closing.
bool StoreServer::authenticate(Client& client) {
  if (client.in.size() < kClientProofBytes) return false;
  ClientProof proof;
  AuthVerdict verdict = AuthVerdict::kAccepted;
  if (!decodeClientProof(client.in.data(), kClientProofBytes, &proof)) {
    verdict = AuthVerdict::kMalformed;
  } else if (!clientProofValid(key_, client.nonce, proof)) {
    verdict = AuthVerdict::kWrongSecret;
  }
  const Bytes answer = encodeVerdict(verdict, key_, client.nonce, proof);
  client.out.insert(client.out.end(), answer.begin(), answer.end());
  if (verdict != AuthVerdict::kAccepted) {
    STRATA_LOG(kWarn, kNet, "TcpStore ", listenAddress_, ": refused a client at ", client.address,
               verdict == AuthVerdict::kWrongSecret ? " claiming rank " + std::to_string(proof.rank) : std::string(),
               ": ", authVerdictText(verdict),
               verdict == AuthVerdict::kWrongSecret
                   ? " (its proof does not match this job's secret: STRATA_JOB_SECRET or the secret file differs)"
                   : " (it did not authenticate)");
    const std::string line = client.address +
                             (verdict == AuthVerdict::kWrongSecret ? " claiming rank " + std::to_string(proof.rank)
                                                                   : std::string()) +
                             ": " + authVerdictText(verdict) + "\n";
    data_[kStoreRefusalsKey].insert(data_[kStoreRefusalsKey].end(), line.begin(), line.end());
    client.closing = true;
    client.in.clear();
    return false;
  }
  client.in.erase(client.in.begin(), client.in.begin() + kClientProofBytes);
  client.authed = true;
  return true;
}

// Handles every complete request in the input buffer, stopping behind a parked get.
bool StoreServer::handleRequests(int fd, Client& client) {
  if (!client.authed && !authenticate(client)) return true;
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
    handle(fd, client, static_cast<Command>(body[0]), key, arg, bodyBytes - kRequestHeadBytes - keyBytes);
  }
  client.in.erase(client.in.begin(), client.in.begin() + static_cast<ptrdiff_t>(offset));
  return true;
}

void StoreServer::handle(int fd, Client& client, Command command, const std::string& key, const uint8_t* arg,
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
      const Bytes& old = data_[key];
      // Counters are decimal text (as in HashStore); a non-number counts as 0.
      const int64_t current = old.empty() ? 0 : std::strtoll(std::string(old.begin(), old.end()).c_str(), nullptr, 10);
      int64_t value = static_cast<int64_t>(loadU64(arg)) + current;
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

void StoreServer::reply(Client& client, Status status, const uint8_t* payload, size_t numBytes) {
  client.out.push_back(static_cast<uint8_t>(status));
  putU64(client.out, numBytes);
  if (numBytes > 0) client.out.insert(client.out.end(), payload, payload + numBytes);
}

// Sends what the socket takes now; the rest goes on POLLOUT. False on a dead client.
bool StoreServer::flush(int fd, Client& client) {
  while (client.outSent < client.out.size()) {
    const ssize_t n =
        ::send(fd, client.out.data() + client.outSent, client.out.size() - client.outSent, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    client.outSent += static_cast<size_t>(n);
  }
  client.out.clear();
  client.outSent = 0;
  return true;
}

void StoreServer::wakeWaiters(const std::string& key) {
  finishWaiters([&](const Waiter& w) { return w.key == key; }, Status::kOk);
}

void StoreServer::expireWaiters() {
  const auto now = Clock::now();
  finishWaiters([&](const Waiter& w) { return w.deadline <= now; }, Status::kTimeout);
}

void StoreServer::expireUnauthenticated() {
  const auto now = Clock::now();
  std::vector<int> expired;
  for (const auto& [fd, client] : clients_)
    if (!client.authed && !client.closing && client.authDeadline <= now) expired.push_back(fd);
  for (const int fd : expired) {
    STRATA_LOG(kWarn, kNet, "TcpStore ", listenAddress_, ": dropped a client at ", clients_.at(fd).address,
               " that did not authenticate within ", kAuthTimeout.count(), " ms");
    dropClient(fd);
  }
}

template <typename Pred>
void StoreServer::finishWaiters(Pred matches, Status status) {
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

void StoreServer::dropClient(int fd) {
  waiters_.erase(std::remove_if(waiters_.begin(), waiters_.end(), [fd](const Waiter& w) { return w.fd == fd; }),
                 waiters_.end());
  clients_.erase(fd);
  ::close(fd);
}

}  // namespace strata::bootstrap::detail
