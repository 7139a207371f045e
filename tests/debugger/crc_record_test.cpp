// Known answers for CRC32C and the TFRecord framing, from the spec and computed by hand.
#include <gtest/gtest.h>

#include <random>

#include "debugger/crc32c.h"
#include "debugger/event_codec.h"
#include "debugger/record.h"
#include "debugger_testing.h"

namespace strata::debugger {
namespace {

using testing::fromHex;
using testing::hexOf;

TEST(Crc32c, KnownAnswer) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32cTable("123456789", 9), 0xE3069283u);
  EXPECT_EQ(maskCrc(0xE3069283u), 0xC78AB0E5u);  // shared/notes/ecosystem.md §3.3
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(Crc32c, HardwareAndTablePathsAgree) {
  std::mt19937 rng(7);
  for (size_t size : {1, 7, 8, 9, 63, 64, 65, 1000, 4099}) {
    std::string data(size, '\0');
    for (char& c : data) c = static_cast<char>(rng());
    EXPECT_EQ(crc32c(data), crc32cTable(data.data(), data.size())) << "size " << size;
  }
}

TEST(Crc32c, MaskRoundTrips) {
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu}) EXPECT_EQ(unmaskCrc(maskCrc(crc)), crc);
}

TEST(Record, FooterMagicIsMaskedCrcOfTheAsciiString) {
  // smdebug: CHECKSUM_MAGIC_BYTES = masked_crc32c(b"0x12345678"), the ten characters.
  EXPECT_EQ(maskCrc(crc32c("0x12345678")), kSmdebugFooterMagic);
  EXPECT_EQ(kSmdebugFooterMagic, 0x062DC0B3u);
}

// Event{wall_time=1.5, step=7, summary{value{tag="w", tensor{DT_FLOAT, shape [2] (dim name
// "w_2"), content [1.0, -2.0]}, metadata{plugin_data [{mode_step,"3"}, {mode,"1"}]}}}},
// encoded by hand (protobuf wire format, fields in number order, as every protobuf library
// serializes) with an independent CRC, followed by the constant footer b3 c0 2d 06.
const char* kGoldenSmdebugRecord =
    "4800000000000000" "fe92489d"
    "09000000000000f83f" "1007" "2a3b" "0a39" "0a0177"
    "4217" "0801" "1209" "1207" "0802" "1203775f32" "2208" "0000803f000000c0"
    "4a1b" "0a0e" "0a096d6f64655f73746570" "120133" "0a09" "0a046d6f6465" "120131"
    "b3c02d06";

TEST(Record, SmdebugTensorRecordMatchesGoldenBytes) {
  TensorEventInfo info;
  info.name = "w";
  info.globalStep = 7;
  info.mode = Mode::kTrain;
  info.modeStep = 3;
  info.wallTime = 1.5;
  TensorData t;
  t.dtype = DType::kFloat32;
  t.shape = {2};
  const float values[2] = {1.0f, -2.0f};
  t.bytes.assign(reinterpret_cast<const char*>(values), sizeof(values));
  std::string record;
  appendRecord(record, encodeTensorEvent(info, std::move(t)), Footer::kSmdebugMagic);
  EXPECT_EQ(hexOf(record), kGoldenSmdebugRecord);
}

// shared/notes/ecosystem.md §3.3: TensorBoard records with real payload CRCs.
TEST(Record, TensorboardRecordsMatchGoldenBytes) {
  std::string first;
  appendRecord(first, encodeTensorboardFileVersion(1.0), Footer::kPayloadCrc);
  EXPECT_EQ(hexOf(first),
            "1800000000000000a37f4b2209000000000000f03f1a0d627261696e2e4576656e743a3286bf577a");
  std::string scalar;
  appendRecord(scalar, encodeTensorboardScalar("loss", 0.5f, 3, 2.0), Footer::kPayloadCrc);
  EXPECT_EQ(hexOf(scalar),
            "1a00000000000000129bd82d09000000000000004010032a0d0a0b0a046c6f7373150000003fbac36b94");
}

TEST(Record, ParseChecksFooterKinds) {
  const std::string record = fromHex(kGoldenSmdebugRecord);
  RecordView view;
  std::string error;
  ASSERT_TRUE(parseRecord(record, 0, FooterCheck::kSmdebugMagic, &view, &error)) << error;
  EXPECT_EQ(view.size, record.size());
  EXPECT_EQ(view.payload.size(), 72u);
  EXPECT_TRUE(parseRecord(record, 0, FooterCheck::kMagicOrCrc, &view, &error));
  EXPECT_FALSE(parseRecord(record, 0, FooterCheck::kPayloadCrc, &view, &error));

  std::string tb;
  appendRecord(tb, encodeTensorboardFileVersion(1.0), Footer::kPayloadCrc);
  EXPECT_TRUE(parseRecord(tb, 0, FooterCheck::kPayloadCrc, &view, &error));
  EXPECT_FALSE(parseRecord(tb, 0, FooterCheck::kSmdebugMagic, &view, &error));
}

TEST(Record, CorruptionIsReportedWithOffset) {
  std::string two;
  appendRecord(two, "first", Footer::kSmdebugMagic);
  const size_t second = two.size();
  appendRecord(two, "second payload", Footer::kSmdebugMagic);
  RecordView view;
  std::string error;
  ASSERT_TRUE(parseRecord(two, second, FooterCheck::kSmdebugMagic, &view, &error));
  EXPECT_EQ(view.payload, "second payload");

  std::string truncated = two.substr(0, two.size() - 3);
  EXPECT_FALSE(parseRecord(truncated, second, FooterCheck::kSmdebugMagic, &view, &error));
  EXPECT_NE(error.find("offset " + std::to_string(second)), std::string::npos) << error;
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;

  std::string badHeader = two;
  badHeader[second] ^= 0x01;  // length byte: its CRC no longer matches
  EXPECT_FALSE(parseRecord(badHeader, second, FooterCheck::kSmdebugMagic, &view, &error));
  EXPECT_NE(error.find("length CRC"), std::string::npos) << error;

  std::string badFooter = two;
  badFooter[badFooter.size() - 1] ^= 0x01;
  EXPECT_FALSE(parseRecord(badFooter, second, FooterCheck::kMagicOrCrc, &view, &error));

  EXPECT_FALSE(parseRecord(two, two.size() + 5, FooterCheck::kNone, &view, &error));
}

}  // namespace
}  // namespace strata::debugger
