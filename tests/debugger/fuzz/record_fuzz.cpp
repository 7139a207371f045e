// libFuzzer target: the TFRecord parser and the event decoder on arbitrary bytes (what a
// corrupted or truncated event file gives the trial reader). Built by build_fuzzers.sh.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "debugger/event_codec.h"
#include "debugger/record.h"
#include "debugger/reductions.h"

using namespace strata::debugger;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (FooterCheck check : {FooterCheck::kNone, FooterCheck::kMagicOrCrc}) {
    size_t offset = 0;
    RecordView record;
    std::string error;
    while (offset < bytes.size() && parseRecord(bytes, offset, check, &record, &error)) {
      DecodedTensorEvent event;
      if (decodeTensorEvent(std::string(record.payload), &event, &error) &&
          event.tensor.dtype != DType::kString) {
        (void)reduceAll(event.tensor, {{ReductionOp::kL2, true}, {ReductionOp::kVariance, false}});
        (void)event.tensor.toDoubles();
      }
      offset += record.size;
    }
  }
  // The payload decoder on its own (no framing).
  DecodedTensorEvent event;
  std::string error;
  (void)decodeTensorEvent(std::string(bytes), &event, &error);
  return 0;
}
