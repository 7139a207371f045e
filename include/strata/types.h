// Plain value types shared by the public API and the torch-free core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace strata {

// Element types. The collectives reduce the first seven (isCollectiveDType; 16-bit floats are
// reduced in float32); the debugger also stores int8/int16 (as int32) and bool, and reads
// string tensors. Values are part of no file format: the order may change.
enum class DType : uint8_t {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt32,
  kInt64,
  kUInt8,
  kInt8,
  kInt16,
  kBool,
  kString,  // variable length: dtypeBytes is 0
};

// Reduction operators. kAvg is a sum divided by the group size (integer division for
// integer types, as NCCL does).
enum class ReduceOp : uint8_t { kSum, kAvg, kMax, kMin, kProd };

// A step's mode: smdebug's ModeKeys with their numbers (smdebug core/modes.py), as the
// debugger's files, the profiler's Step:ModeKeys.<MODE> events and the rules use them.
enum class Mode : int { kTrain = 1, kEval = 2, kPredict = 3, kGlobal = 4 };
inline constexpr Mode kAllModes[] = {Mode::kTrain, Mode::kEval, Mode::kPredict, Mode::kGlobal};

const char* modeName(Mode mode);  // "TRAIN", "EVAL", "PREDICT", "GLOBAL"
// Parses a mode name (exact, upper case); false when unknown.
bool parseModeName(const std::string& name, Mode* out);

size_t dtypeBytes(DType dtype);   // element size; 0 for kString
const char* dtypeName(DType dtype);  // "float32", "bfloat16", ...
// Parses a dtypeName (exact); false when unknown.
bool parseDTypeName(const std::string& name, DType* out);
// Whether the collectives (allreduce, broadcast, ...) take buffers of this type.
bool isCollectiveDType(DType dtype);
const char* reduceOpName(ReduceOp op);

}  // namespace strata
