// CRC-32C (Castagnoli) and the TFRecord "masked" CRC (specs/smdebug.md §1.2).
//
// Pure functions, thread-safe. The hardware path (SSE4.2 crc32 instruction) is chosen once
// at run time when the CPU has it; the table path gives identical results everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace strata::debugger {

// CRC-32C of `size` bytes: reflected polynomial 0x82F63B78, init and xorout 0xFFFFFFFF.
// Known answer: crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, size_t size);
inline uint32_t crc32c(std::string_view bytes) { return crc32c(bytes.data(), bytes.size()); }

// The portable byte-table implementation (exposed so tests can compare both paths).
uint32_t crc32cTable(const void* data, size_t size);

// TFRecord's mask: rotate right by 15 and add a constant, so that a CRC stored inside the
// data it covers does not produce a trivial CRC.
constexpr uint32_t maskCrc(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}
constexpr uint32_t unmaskCrc(uint32_t masked) {
  const uint32_t rot = masked - 0xA282EAD8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace strata::debugger
