// Socket helpers of the TCP transport and the TCP store: an owning fd, addresses, listen/connect/accept
// bounded by deadlines, and the blocking-with-deadline I/O the handshake uses.
//
// Thread-safety: free functions are thread-safe; an Fd is used by one thread at a time.
// Errors: functions returning IoStatus/-1 never throw; the others throw NetworkError
// (TimeoutError when a deadline passed) naming the address and the errno text.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace strata::net {

using Clock = std::chrono::steady_clock;

// Owns one file descriptor. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// "Connection refused (errno 111)".
std::string errnoText(int err);

// "host:port", bracketing IPv6 literals: "[::1]:5000".
std::string formatHostPort(const std::string& host, uint16_t port);
// Inverse of formatHostPort; false when `text` has no valid port.
bool parseHostPort(const std::string& text, std::string* host, uint16_t* port);

// Options of every data connection: TCP_NODELAY and large kernel buffers.
void setDataSocketOptions(int fd);
void setNonBlocking(int fd);

// A listening socket on bindHost ("" or "0.0.0.0": all IPv4 interfaces), port 0.
Fd listenOn(const std::string& bindHost);
uint16_t localPort(int fd);
// "10.0.0.7:51234" for a connected socket; "?" when unknown. Never throws.
std::string peerAddress(int fd);

// Connects to host:port, retrying refused attempts until the deadline.
Fd connectWithRetry(const std::string& host, uint16_t port, Clock::time_point deadline,
                    const std::string& what);

// Accepts one connection; an invalid Fd means the deadline passed.
Fd acceptUntil(int listenFd, Clock::time_point deadline);

enum class IoStatus { kOk, kTimeout, kClosed, kError };
// Send or receive exactly numBytes before the deadline; *err is set on kError.
IoStatus sendAll(int fd, const void* data, size_t numBytes, Clock::time_point deadline, int* err);
IoStatus recvAll(int fd, void* data, size_t numBytes, Clock::time_point deadline, int* err);
const char* ioStatusText(IoStatus status);

// Waits for `events` on fd; false when the deadline passed first (errors: true, so the
// next syscall reports them).
bool pollUntil(int fd, short events, Clock::time_point deadline);

// Milliseconds left before the deadline, clamped to [0, 2^30] for poll(2).
int remainingMs(Clock::time_point deadline);

// This machine's address for peers: the first IPv4 address of its hostname, or 127.0.0.1.
std::string hostnameAddress();

}  // namespace strata::net
