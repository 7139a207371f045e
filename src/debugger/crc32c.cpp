#include "debugger/crc32c.h"

#include <array>
#include <cstring>

namespace strata::debugger {
namespace {

constexpr uint32_t kReflectedPoly = 0x82F63B78u;

std::array<uint32_t, 256> makeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kReflectedPoly : 0u);
    table[i] = crc;
  }
  return table;
}

const std::array<uint32_t, 256>& table() {
  static const std::array<uint32_t, 256> kTable = makeTable();
  return kTable;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32cHardware(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t crc = 0xFFFFFFFFu;
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    crc = __builtin_ia32_crc32di(crc, word);
    p += 8;
    size -= 8;
  }
  auto crc32 = static_cast<uint32_t>(crc);
  while (size-- > 0) crc32 = __builtin_ia32_crc32qi(crc32, *p++);
  return crc32 ^ 0xFFFFFFFFu;
}

bool hasSse42() {
  static const bool kHas = __builtin_cpu_supports("sse4.2");
  return kHas;
}
#endif

}  // namespace

uint32_t crc32cTable(const void* data, size_t size) {
  const auto& t = table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) crc = t[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t crc32c(const void* data, size_t size) {
#if defined(__x86_64__)
  if (hasSse42()) return crc32cHardware(data, size);
#endif
  return crc32cTable(data, size);
}

}  // namespace strata::debugger
