// Vocabulary of the debugger: modes, element types and an owned tensor buffer.
// Plain values; everything here is pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "strata/types.h"

namespace strata::debugger {

// smdebug ModeKeys (strata/types.h): the event's "mode" plugin content is the number, the
// index JSON's meta.mode is the name (modeName).
using strata::kAllModes;
using strata::Mode;
using strata::modeName;
using strata::parseModeName;
// Parses the event's numeric content "1".."4"; false when unknown.
bool parseModeNumber(int number, Mode* out);

// Element types a caller may hand to the writer, and those a reader may meet.
enum class DType {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,  // never stored: converted to float32 (smdebug's reader has no bfloat16)
  kInt8,      // never stored: converted to int32 (smdebug's reader maps DT_INT8 to uint8)
  kInt16,     // never stored: converted to int32 (smdebug's reader has no int16)
  kInt32,
  kInt64,
  kUInt8,
  kBool,
  kString,    // read only (smdebug writes string tensors in string_val)
};

const char* dtypeName(DType dtype);  // "float32", "bfloat16", ...
size_t dtypeBytes(DType dtype);      // element size; 0 for kString
// The type a tensor of `dtype` is stored as: one the smdebug reader maps
// (float32/64, float16, int32/64, uint8, bool; specs/smdebug.md §8.7).
DType storedDType(DType dtype);

// An owned, C-order, little-endian tensor.
struct TensorData {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;        // empty: 0-d
  std::string bytes;                 // numel * dtypeBytes(dtype)
  std::vector<std::string> strings;  // kString only

  size_t numel() const;
  // Every element as a double (bool as 0/1, float16/bfloat16 widened). Throws
  // strata::Error for kString.
  std::vector<double> toDoubles() const;
  // The single element of a one-element tensor as a double; throws otherwise.
  double scalar() const;
};

size_t numelOf(const std::vector<int64_t>& shape);

// Converts `numel` elements of `dtype` at `data` into the stored type (storedDType), as
// little-endian bytes. A plain copy when the type is already storable.
std::string toStoredBytes(DType dtype, const void* data, size_t numel);

// Element `p` of `dtype` as a double (bool as 0/1). 0 for kString.
double elementAsDouble(DType dtype, const char* p);

// IEEE half / bfloat16 bit patterns to float.
float halfToFloat(uint16_t bits);
float bfloat16ToFloat(uint16_t bits);
uint16_t floatToHalf(float value);  // round to nearest even (tests and fixtures)

}  // namespace strata::debugger
