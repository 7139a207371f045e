// The first bytes on a new transport connection. The connecting (lower) rank sends a
// Hello naming itself, the rank it means to reach and the job secret; the accepting rank
// answers with one HelloStatus byte and closes the socket unless it is kAccepted.
//
// Wire format (little-endian): u32 magic | u16 version | u16 reserved | i32 fromRank |
// i32 toRank | u32 secretBytes | secret. The secret travels in clear: it keeps a
// different job (or a stray connection) out, it is not protection against a sniffer.
// With STRATA_TLS=1 the Hello (and everything after it) travels inside TLS (tls.h).
//
// Thread-safety: stateless free functions.
#pragma once

#include <cstdint>
#include <string>

#include "transport/tcp/socket.h"
#include "transport/tcp/tls.h"

namespace strata::transport::tcp {

struct Hello {
  int fromRank = -1;
  int toRank = -1;
  std::string secret;
};

enum class HelloStatus : uint8_t { kAccepted = 0, kWrongSecret = 1, kWrongRank = 2 };
const char* helloStatusText(HelloStatus status);

// With `tls` (STRATA_TLS), the bytes travel inside that session instead of in clear.
IoStatus sendHello(int fd, const Hello& hello, Clock::time_point deadline, int* err,
                   TlsSession* tls = nullptr);
// False (with *why) on a timeout, a closed socket or bytes that are not a Hello.
bool recvHello(int fd, Hello* hello, Clock::time_point deadline, std::string* why,
               TlsSession* tls = nullptr);

IoStatus sendHelloStatus(int fd, HelloStatus status, Clock::time_point deadline, int* err,
                         TlsSession* tls = nullptr);
IoStatus recvHelloStatus(int fd, HelloStatus* status, Clock::time_point deadline, int* err,
                         TlsSession* tls = nullptr);

// Compares in time independent of where the strings differ.
bool secretsEqual(const std::string& a, const std::string& b);

}  // namespace strata::transport::tcp
