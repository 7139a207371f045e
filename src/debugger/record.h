// TFRecord framing as smdebug and TensorBoard use it (specs/smdebug.md §1.2, §8.1).
//
//   uint64 length (LE) | uint32 maskedCrc32c(length bytes) | payload | uint32 footer
//
// smdebug's tensor files carry a CONSTANT footer, kSmdebugFooterMagic, not the payload CRC:
// smdebug writes them with write_checksum=False and its reader (check="minimal") requires
// that constant. TensorBoard files carry the real masked CRC32C of the payload. A file
// cannot serve both readers. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata::debugger {

// masked_crc32c(b"0x12345678"): the ten ASCII characters, not the number. On disk b3 c0 2d 06.
inline constexpr uint32_t kSmdebugFooterMagic = 0x062DC0B3u;
// 8 bytes length + 4 bytes length CRC + 4 bytes footer.
inline constexpr size_t kRecordHeaderBytes = 12;
inline constexpr size_t kRecordOverheadBytes = 16;

enum class Footer {
  kSmdebugMagic,  // smdebug tensor files
  kPayloadCrc,    // TensorBoard / TensorFlow files
};

// The 12 header bytes for a payload of `payloadSize` bytes.
void encodeRecordHeader(uint64_t payloadSize, char out[kRecordHeaderBytes]);
// The footer value for `payload` (little-endian when written).
uint32_t recordFooter(std::string_view payload, Footer footer);
// Appends one complete record to `out`.
void appendRecord(std::string& out, std::string_view payload, Footer footer);

// What a reader accepts as a footer.
enum class FooterCheck {
  kNone,          // ignore the footer
  kSmdebugMagic,  // exactly the magic (what smdebug's own reader requires)
  kPayloadCrc,    // the real payload CRC (what TensorBoard requires)
  kMagicOrCrc,    // either (our trial reader: smdebug tensor files or TF-style ones)
};

struct RecordView {
  std::string_view payload;  // points into the parsed bytes
  size_t offset = 0;         // where the record starts
  size_t size = 0;           // whole record bytes: payload + kRecordOverheadBytes
};

// Parses the record starting at `offset`. On failure returns false and sets *error to a
// message naming the offset and what was wrong (truncated, header CRC, footer); never
// reads past `bytes`.
bool parseRecord(std::string_view bytes, size_t offset, FooterCheck check, RecordView* out,
                 std::string* error);

}  // namespace strata::debugger
