#include "strata/types.h"

namespace strata {

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

const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kBool: return "bool";
    case DType::kString: return "string";
  }
  return "?";
}

bool parseDTypeName(const std::string& name, DType* out) {
  for (int d = 0; d <= static_cast<int>(DType::kString); ++d)
    if (name == dtypeName(static_cast<DType>(d))) {
      *out = static_cast<DType>(d);
      return true;
    }
  return false;
}

bool isCollectiveDType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt8: return true;
    case DType::kInt8:
    case DType::kInt16:
    case DType::kBool:
    case DType::kString: return false;
  }
  return false;
}

const char* modeName(Mode mode) {
  switch (mode) {
    case Mode::kTrain: return "TRAIN";
    case Mode::kEval: return "EVAL";
    case Mode::kPredict: return "PREDICT";
    case Mode::kGlobal: return "GLOBAL";
  }
  return "GLOBAL";
}

bool parseModeName(const std::string& name, Mode* out) {
  for (Mode m : kAllModes) {
    if (name == modeName(m)) {
      *out = m;
      return true;
    }
  }
  return false;
}

const char* reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kProd: return "prod";
  }
  return "?";
}

}  // namespace strata
