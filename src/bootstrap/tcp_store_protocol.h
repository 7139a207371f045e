// The TcpStore wire protocol, shared by its server (tcp_store_server.cpp) and its client
// (tcp_store.cpp). After the authentication step (store_auth.h), in host byte order
// (little-endian only; one request in flight per client):
//   request: u32 bodyBytes | u8 command | u32 keyBytes | key | argument
//            kSet: the value   kGet: u64 wait in ms   kAdd: i64 delta   kCheck: nothing
//   reply:   u8 status | u64 payloadBytes | payload
//            kSet: nothing     kGet: the value, or status kTimeout once the wait expired
//            kAdd: i64 result  kCheck: u8 0 or 1
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>

#include "bootstrap/store.h"

namespace strata::bootstrap::detail {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the store protocol is little-endian");

enum class Command : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kCheck = 4 };
enum class Status : uint8_t { kOk = 0, kTimeout = 1, kBadRequest = 2 };

// Keys are short names ("tcp/addr/3"); the bound only stops a confused client early.
constexpr size_t kMaxKeyBytes = 64 * 1024;
// Values are addresses and small blobs; bounds what one bad client can make us allocate.
constexpr size_t kMaxBodyBytes = size_t{256} << 20;
constexpr size_t kRequestPrefixBytes = 4;    // u32 bodyBytes
constexpr size_t kRequestHeadBytes = 1 + 4;  // command + keyBytes
constexpr size_t kReplyHeadBytes = 1 + 8;    // status + payloadBytes
// A client must finish the authentication step this soon after it connected; a silent
// or slow one is dropped (it holds a socket, nothing else).
constexpr std::chrono::milliseconds kAuthTimeout{30000};

inline void putU32(Bytes& out, uint32_t v) {
  out.insert(out.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 4);
}
inline void putU64(Bytes& out, uint64_t v) {
  out.insert(out.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 8);
}
inline uint32_t loadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t loadU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace strata::bootstrap::detail
