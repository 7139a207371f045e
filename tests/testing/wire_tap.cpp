#include "testing/wire_tap.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <vector>

namespace strata::testing {
namespace {

int connectTo(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list) != 0) return -1;
  int fd = -1;
  for (addrinfo* ai = list; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(list);
  return fd;
}

bool writeAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// One relayed connection: client and server sockets, and which sides have ended.
struct Pair {
  int client = -1;
  int server = -1;
  bool clientDone = false;
  bool serverDone = false;
};

}  // namespace

WireTap::WireTap(std::function<std::pair<std::string, uint16_t>()> target) : target_(std::move(target)) {
  listenFd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listenFd_ < 0 || ::bind(listenFd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listenFd_, 16) != 0 || ::getsockname(listenFd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error("WireTap: cannot listen on 127.0.0.1");
  port_ = ntohs(addr.sin_port);
  stopFd_ = ::eventfd(0, EFD_CLOEXEC);
  thread_ = std::thread([this] { run(); });
}

WireTap::~WireTap() {
  const uint64_t one = 1;
  if (::write(stopFd_, &one, sizeof(one)) < 0) { /* the thread also stops on its own errors */
  }
  thread_.join();
  ::close(listenFd_);
  ::close(stopFd_);
}

std::string WireTap::clientToServer() const {
  std::lock_guard<std::mutex> lock(mu_);
  return up_;
}

std::string WireTap::serverToClient() const {
  std::lock_guard<std::mutex> lock(mu_);
  return down_;
}

int WireTap::connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return connections_;
}

void WireTap::run() {
  std::vector<Pair> pairs;
  char buffer[65536];
  for (;;) {
    std::vector<pollfd> fds{{stopFd_, POLLIN, 0}, {listenFd_, POLLIN, 0}};
    for (const Pair& p : pairs) {
      fds.push_back({p.clientDone ? -1 : p.client, POLLIN, 0});
      fds.push_back({p.serverDone ? -1 : p.server, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) break;
    for (size_t i = 0; i < pairs.size(); ++i) {
      Pair& p = pairs[i];
      for (const bool fromClient : {true, false}) {
        const pollfd& f = fds[2 + 2 * i + (fromClient ? 0 : 1)];
        if (f.fd < 0 || f.revents == 0) continue;
        const int from = fromClient ? p.client : p.server;
        const int to = fromClient ? p.server : p.client;
        const ssize_t n = ::recv(from, buffer, sizeof(buffer), 0);
        if (n > 0) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            (fromClient ? up_ : down_).append(buffer, static_cast<size_t>(n));
          }
          if (!writeAll(to, buffer, static_cast<size_t>(n))) p.clientDone = p.serverDone = true;  // the other end died
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          (fromClient ? p.clientDone : p.serverDone) = true;
          ::shutdown(to, SHUT_WR);
        }
      }
    }
    for (auto it = pairs.begin(); it != pairs.end();) {
      if (it->clientDone && it->serverDone) {
        ::close(it->client);
        ::close(it->server);
        it = pairs.erase(it);
      } else {
        ++it;
      }
    }
    if (fds[1].revents != 0) {
      const int client = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      const auto [host, port] = target_();
      const int server = connectTo(host, port);
      if (server < 0) {
        ::close(client);
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      ++connections_;
      pairs.push_back(Pair{client, server, false, false});
    }
  }
  for (const Pair& p : pairs) {
    ::close(p.client);
    ::close(p.server);
  }
}

}  // namespace strata::testing
