#include "debugger/types.h"

#include <cmath>
#include <cstring>

#include "core/errors.h"

// Tensor bytes are stored and read as little-endian with plain memcpy.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the debugger assumes a little-endian host");

namespace strata::debugger {

bool parseModeNumber(int number, Mode* out) {
  if (number < 1 || number > 4) return false;
  *out = static_cast<Mode>(number);
  return true;
}

const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kBool: return "bool";
    case DType::kString: return "string";
  }
  return "?";
}

size_t dtypeBytes(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
    case DType::kInt64: return 8;
    case DType::kFloat32:
    case DType::kInt32: return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16: return 2;
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool: return 1;
    case DType::kString: return 0;
  }
  return 0;
}

DType storedDType(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16: return DType::kFloat32;
    case DType::kInt8:
    case DType::kInt16: return DType::kInt32;
    default: return dtype;
  }
}

size_t numelOf(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d < 0 ? 0 : d);
  return n;
}

size_t TensorData::numel() const {
  return dtype == DType::kString ? strings.size() : numelOf(shape);
}

float halfToFloat(uint16_t bits) {
  const uint32_t sign = (bits >> 15) & 1u;
  const uint32_t exp = (bits >> 10) & 0x1Fu;
  const uint32_t mant = bits & 0x3FFu;
  float value;
  if (exp == 0) {
    value = std::ldexp(static_cast<float>(mant), -24);  // subnormal (or zero)
  } else if (exp == 31) {
    value = mant ? NAN : INFINITY;
  } else {
    value = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  }
  return sign ? -value : value;
}

float bfloat16ToFloat(uint16_t bits) {
  const uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, 4);
  return value;
}

uint16_t floatToHalf(float value) {
  uint32_t f;
  std::memcpy(&f, &value, 4);
  const uint32_t sign = (f >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((f >> 23) & 0xFFu) - 127 + 15;
  uint32_t mant = f & 0x7FFFFFu;
  if (((f >> 23) & 0xFFu) == 0xFFu) return static_cast<uint16_t>(sign | 0x7C00u | (mant ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7C00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - exp;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

namespace {

template <typename T>
T loadAs(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

double elementAsDouble(DType dtype, const char* p) {
  switch (dtype) {
    case DType::kFloat32: return loadAs<float>(p);
    case DType::kFloat64: return loadAs<double>(p);
    case DType::kFloat16: return halfToFloat(loadAs<uint16_t>(p));
    case DType::kBFloat16: return bfloat16ToFloat(loadAs<uint16_t>(p));
    case DType::kInt8: return loadAs<int8_t>(p);
    case DType::kInt16: return loadAs<int16_t>(p);
    case DType::kInt32: return loadAs<int32_t>(p);
    case DType::kInt64: return static_cast<double>(loadAs<int64_t>(p));
    case DType::kUInt8: return loadAs<uint8_t>(p);
    case DType::kBool: return *p ? 1.0 : 0.0;
    case DType::kString: break;
  }
  return 0;
}

std::vector<double> TensorData::toDoubles() const {
  STRATA_CHECK(dtype != DType::kString, "a string tensor has no numeric values");
  const size_t n = numel();
  const size_t width = dtypeBytes(dtype);
  STRATA_CHECK(bytes.size() == n * width, "tensor of ", n, " ", dtypeName(dtype),
               " elements holds ", bytes.size(), " bytes, expected ", n * width);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = elementAsDouble(dtype, bytes.data() + i * width);
  return out;
}

double TensorData::scalar() const {
  STRATA_CHECK(numel() == 1, "expected a one-element tensor, got ", numel(), " elements");
  return toDoubles()[0];
}

std::string toStoredBytes(DType dtype, const void* data, size_t numel) {
  const auto* in = static_cast<const char*>(data);
  const DType stored = storedDType(dtype);
  if (stored == dtype) return std::string(in, numel * dtypeBytes(dtype));
  std::string out(numel * dtypeBytes(stored), '\0');
  char* o = out.data();
  for (size_t i = 0; i < numel; ++i) {
    if (stored == DType::kFloat32) {
      const float v = bfloat16ToFloat(loadAs<uint16_t>(in + 2 * i));
      std::memcpy(o + 4 * i, &v, 4);
    } else {  // int8 / int16 -> int32
      const auto v = static_cast<int32_t>(elementAsDouble(dtype, in + i * dtypeBytes(dtype)));
      std::memcpy(o + 4 * i, &v, 4);
    }
  }
  return out;
}

}  // namespace strata::debugger
