#include "debugger/record.h"

#include <cstring>

#include "debugger/crc32c.h"

namespace strata::debugger {
namespace {

// Little-endian encoding, independent of the host's byte order.
void putLe(char* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xFFu);
}

uint64_t getLe(const char* in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return value;
}

// Bounded record size when parsing: a corrupted length must not make us trust a huge
// value. 1 TiB is far above any real tensor and far below overflow of size_t arithmetic.
constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 40;

}  // namespace

void encodeRecordHeader(uint64_t payloadSize, char out[kRecordHeaderBytes]) {
  putLe(out, payloadSize, 8);
  putLe(out + 8, maskCrc(crc32c(out, 8)), 4);
}

uint32_t recordFooter(std::string_view payload, Footer footer) {
  return footer == Footer::kSmdebugMagic ? kSmdebugFooterMagic : maskCrc(crc32c(payload));
}

void appendRecord(std::string& out, std::string_view payload, Footer footer) {
  char header[kRecordHeaderBytes];
  encodeRecordHeader(payload.size(), header);
  char tail[4];
  putLe(tail, recordFooter(payload, footer), 4);
  out.reserve(out.size() + payload.size() + kRecordOverheadBytes);
  out.append(header, kRecordHeaderBytes);
  out.append(payload.data(), payload.size());
  out.append(tail, 4);
}

bool parseRecord(std::string_view bytes, size_t offset, FooterCheck check, RecordView* out,
                 std::string* error) {
  const auto fail = [&](const std::string& what) {
    *error = "record at byte offset " + std::to_string(offset) + ": " + what;
    return false;
  };
  if (offset > bytes.size() || bytes.size() - offset < kRecordHeaderBytes)
    return fail("truncated header (" + std::to_string(offset > bytes.size() ? 0 : bytes.size() - offset) +
                " bytes left, need " + std::to_string(kRecordHeaderBytes) + ")");
  const char* p = bytes.data() + offset;
  const uint64_t length = getLe(p, 8);
  const auto storedLengthCrc = static_cast<uint32_t>(getLe(p + 8, 4));
  if (storedLengthCrc != maskCrc(crc32c(p, 8)))
    return fail("length CRC mismatch (corrupted header)");
  if (length > kMaxPayloadBytes) return fail("implausible length " + std::to_string(length));
  const size_t available = bytes.size() - offset;
  if (available < length + kRecordOverheadBytes)
    return fail("truncated: record needs " + std::to_string(length + kRecordOverheadBytes) +
                " bytes, " + std::to_string(available) + " left");
  const std::string_view payload(p + kRecordHeaderBytes, length);
  const auto footer = static_cast<uint32_t>(getLe(p + kRecordHeaderBytes + length, 4));
  const bool isMagic = footer == kSmdebugFooterMagic;
  const auto isCrc = [&] { return footer == maskCrc(crc32c(payload)); };
  bool ok = true;
  switch (check) {
    case FooterCheck::kNone: break;
    case FooterCheck::kSmdebugMagic: ok = isMagic; break;
    case FooterCheck::kPayloadCrc: ok = isCrc(); break;
    case FooterCheck::kMagicOrCrc: ok = isMagic || isCrc(); break;
  }
  if (!ok) return fail("footer is neither the smdebug magic nor the payload CRC (corrupted payload)");
  out->payload = payload;
  out->offset = offset;
  out->size = length + kRecordOverheadBytes;
  return true;
}

}  // namespace strata::debugger
