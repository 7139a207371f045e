// smdebug tensor events and TensorBoard scalar events <-> bytes (specs/smdebug.md §1.3,
// shared/notes/ecosystem.md §3.3). Uses the classes protoc generates from proto/*.proto.
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "debugger/histogram.h"
#include "debugger/types.h"

namespace strata::debugger {

struct TensorEventInfo {
  std::string name;       // Summary.Value.tag
  int64_t globalStep = 0; // Event.step
  Mode mode = Mode::kGlobal;
  int64_t modeStep = 0;
  double wallTime = 0;    // seconds since the epoch
};

// Serializes one smdebug Event holding `tensor` (already in a stored dtype, see
// storedDType). Consumes tensor.bytes (moved into the message, not copied).
std::string encodeTensorEvent(const TensorEventInfo& info, TensorData&& tensor);

// A decoded smdebug tensor event.
struct DecodedTensorEvent {
  TensorEventInfo info;  // mode/modeStep from the plugin data when present
  bool hasModeInfo = false;
  TensorData tensor;
};
// Parses one Event payload. Returns false with *error set for a payload that is not an
// Event with one tensor value or whose dtype/size is inconsistent.
bool decodeTensorEvent(const std::string& payload, DecodedTensorEvent* out, std::string* error);

// TensorBoard: the first event of every file, and a scalar summary.
std::string encodeTensorboardFileVersion(double wallTime);
std::string encodeTensorboardScalar(const std::string& tag, float value, int64_t step,
                                    double wallTime);
std::string encodeTensorboardHistogram(const std::string& tag, const Histogram& histogram, int64_t step,
                                       double wallTime);

}  // namespace strata::debugger
