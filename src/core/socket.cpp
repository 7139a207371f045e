#include "core/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "core/errors.h"
#include "core/logging.h"

namespace strata::net {
namespace {

// Bandwidth-delay product of a 10 Gbit/s link at ~3 ms RTT; the kernel caps the request
// at net.core.{w,r}mem_max. Set before connect/listen so the window scale covers it.
constexpr int kSocketBufferBytes = 4 << 20;
// Every rank of a large job may connect to one peer at once.
constexpr int kListenBacklog = 1024;
// Retries of a refused connect back off from 10 ms to 500 ms.
constexpr std::chrono::milliseconds kMinBackoff{10};
constexpr std::chrono::milliseconds kMaxBackoff{500};

// One attempt on every address of host:port. Returns a connected socket or sets *why.
Fd connectOnce(const addrinfo* list, Clock::time_point deadline, std::string* why) {
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      *why = errnoText(errno);
      continue;
    }
    setDataSocketOptions(fd.get());
    int soError = ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
    if (soError == EINPROGRESS) {
      soError = pollUntil(fd.get(), POLLOUT, deadline) ? 0 : ETIMEDOUT;
      socklen_t len = sizeof(soError);
      if (soError == 0) ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &soError, &len);
    }
    if (soError == 0) return fd;
    *why = errnoText(soError);
  }
  return Fd();
}

}  // namespace

bool pollUntil(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, remainingMs(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return true;  // the next syscall reports the error
  }
}


Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int Fd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string errnoText(int err) {
  return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
}

std::string formatHostPort(const std::string& host, uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

bool parseHostPort(const std::string& text, std::string* host, uint16_t* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 >= text.size()) return false;
  const std::string portText = text.substr(colon + 1);
  if (portText.find_first_not_of("0123456789") != std::string::npos || portText.size() > 5)
    return false;
  const unsigned long value = std::stoul(portText);
  if (value == 0 || value > 65535) return false;
  std::string h = text.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) return false;
  *host = h;
  *port = static_cast<uint16_t>(value);
  return true;
}

void setDataSocketOptions(int fd) {
  const int one = 1;
  const int bufferBytes = kSocketBufferBytes;
  // Best effort: a kernel that refuses leaves working defaults behind.
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufferBytes, sizeof(bufferBytes));
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufferBytes, sizeof(bufferBytes));
}

void setNonBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  STRATA_CHECK_NET(flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0,
                   "fcntl(O_NONBLOCK) failed: ", errnoText(errno));
}

Fd listenOn(const std::string& bindHost) {
  const std::string host = bindHost.empty() ? "0.0.0.0" : bindHost;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* list = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), "0", &hints, &list);
  STRATA_CHECK_NET(rc == 0, "tcp listen: cannot resolve bind host \"", host,
                   "\": ", ::gai_strerror(rc));
  std::string why = "no address";
  Fd fd;
  for (const addrinfo* ai = list; ai != nullptr && !fd.valid(); ai = ai->ai_next) {
    fd.reset(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      why = errnoText(errno);
      continue;
    }
    setDataSocketOptions(fd.get());  // accepted sockets inherit the buffer sizes
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 ||
        ::listen(fd.get(), kListenBacklog) != 0) {
      why = errnoText(errno);
      fd.reset();
    }
  }
  ::freeaddrinfo(list);
  STRATA_CHECK_NET(fd.valid(), "tcp listen on ", host, " failed: ", why);
  return fd;
}

uint16_t localPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  STRATA_CHECK_NET(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0,
                   "getsockname failed: ", errnoText(errno));
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

std::string peerAddress(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  char text[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET6) {
    const auto* a6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    if (::inet_ntop(AF_INET6, &a6->sin6_addr, text, sizeof(text)) == nullptr) return "?";
    return formatHostPort(text, ntohs(a6->sin6_port));
  }
  const auto* a4 = reinterpret_cast<const sockaddr_in*>(&addr);
  if (::inet_ntop(AF_INET, &a4->sin_addr, text, sizeof(text)) == nullptr) return "?";
  return formatHostPort(text, ntohs(a4->sin_port));
}

Fd connectWithRetry(const std::string& host, uint16_t port, Clock::time_point deadline,
                    const std::string& what) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  STRATA_CHECK_NET(rc == 0, what, ": cannot resolve ", formatHostPort(host, port), ": ",
                   ::gai_strerror(rc));
  const auto start = Clock::now();
  auto backoff = kMinBackoff;
  std::string why;
  int attempts = 0;
  Fd fd;
  for (;;) {
    ++attempts;
    fd = connectOnce(list, deadline, &why);
    if (fd.valid() || Clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  ::freeaddrinfo(list);
  if (!fd.valid()) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    STRATA_THROW(TimeoutError, what, ": cannot connect to ", formatHostPort(host, port), " after ",
                 attempts, " attempts in ", waited.count(), " ms: ", why);
  }
  return fd;
}

Fd acceptUntil(int listenFd, Clock::time_point deadline) {
  for (;;) {
    Fd fd(::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC));
    if (fd.valid()) return fd;
    const int err = errno;
    if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR && err != ECONNABORTED) {
      STRATA_THROW(NetworkError, "tcp accept failed: ", errnoText(err));
    }
    if (err != EINTR && err != ECONNABORTED && !pollUntil(listenFd, POLLIN, deadline)) return Fd();
  }
}

IoStatus sendAll(int fd, const void* data, size_t numBytes, Clock::time_point deadline, int* err) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  while (numBytes > 0) {
    const ssize_t n = ::send(fd, bytes, numBytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      bytes += n;
      numBytes -= static_cast<size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!pollUntil(fd, POLLOUT, deadline)) return IoStatus::kTimeout;
    } else if (errno != EINTR) {
      *err = errno;
      return errno == EPIPE || errno == ECONNRESET ? IoStatus::kClosed : IoStatus::kError;
    }
  }
  return IoStatus::kOk;
}

IoStatus recvAll(int fd, void* data, size_t numBytes, Clock::time_point deadline, int* err) {
  auto* bytes = static_cast<uint8_t*>(data);
  while (numBytes > 0) {
    const ssize_t n = ::recv(fd, bytes, numBytes, MSG_DONTWAIT);
    if (n > 0) {
      bytes += n;
      numBytes -= static_cast<size_t>(n);
    } else if (n == 0) {
      return IoStatus::kClosed;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!pollUntil(fd, POLLIN, deadline)) return IoStatus::kTimeout;
    } else if (errno != EINTR) {
      *err = errno;
      return errno == ECONNRESET ? IoStatus::kClosed : IoStatus::kError;
    }
  }
  return IoStatus::kOk;
}

const char* ioStatusText(IoStatus status) {
  switch (status) {
    case IoStatus::kOk: return "ok";
    case IoStatus::kTimeout: return "timed out";
    case IoStatus::kClosed: return "connection closed by peer";
    case IoStatus::kError: return "socket error";
  }
  return "?";
}

int remainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, int64_t{1} << 30));
}

std::string hostnameAddress() {
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (::getaddrinfo(name, nullptr, &hints, &list) != 0 || list == nullptr) return "127.0.0.1";
  char text[INET_ADDRSTRLEN] = {0};
  const auto* a4 = reinterpret_cast<const sockaddr_in*>(list->ai_addr);
  const bool ok = ::inet_ntop(AF_INET, &a4->sin_addr, text, sizeof(text)) != nullptr;
  ::freeaddrinfo(list);
  return ok ? std::string(text) : "127.0.0.1";
}

}  // namespace strata::net
