// Bytes as lowercase hexadecimal, two digits a byte: digests, keys and secrets as text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

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

}  // namespace strata
