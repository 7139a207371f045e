// Bytes as lowercase hexadecimal, two digits a byte: digests, keys and secrets as text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

inline std::string toHex(const void* data, size_t size) {
  static const char* const kDigits = "0123456789abcdef";
  const auto* bytes = static_cast<const uint8_t*>(data);
  std::string hex;
  hex.reserve(2 * size);
  for (size_t i = 0; i < size; ++i) {
    hex += kDigits[bytes[i] >> 4];
    hex += kDigits[bytes[i] & 15];
  }
  return hex;
}

// Any contiguous container of bytes (std::array, std::vector, std::string).
template <typename Bytes>
std::string toHex(const Bytes& bytes) {
  return toHex(bytes.data(), bytes.size());
}

// The bytes of a hexadecimal text (either case); std::nullopt when it is not one (an odd
// length or a character other than 0-9, a-f, A-F).
inline std::optional<std::vector<uint8_t>> fromHex(std::string_view hex) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return std::nullopt;
  std::vector<uint8_t> bytes(hex.size() / 2);
  for (size_t i = 0; i < bytes.size(); ++i) {
    const int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    bytes[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return bytes;
}

}  // namespace strata
