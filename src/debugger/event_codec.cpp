#include "debugger/event_codec.h"

#include <cstring>

#include "debugger/proto/smdebug_event.pb.h"
#include "debugger/proto/tensorboard_event.pb.h"

namespace strata::debugger {
namespace {

smdebug::DataType toProtoDType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return smdebug::DT_FLOAT;
    case DType::kFloat64: return smdebug::DT_DOUBLE;
    case DType::kFloat16: return smdebug::DT_HALF;
    case DType::kBFloat16: return smdebug::DT_BFLOAT16;
    case DType::kInt8: return smdebug::DT_INT8;
    case DType::kInt16: return smdebug::DT_INT16;
    case DType::kInt32: return smdebug::DT_INT32;
    case DType::kInt64: return smdebug::DT_INT64;
    case DType::kUInt8: return smdebug::DT_UINT8;
    case DType::kBool: return smdebug::DT_BOOL;
    case DType::kString: return smdebug::DT_STRING;
  }
  return smdebug::DT_INVALID;
}

bool fromProtoDType(int dtype, DType* out) {
  switch (dtype) {
    case smdebug::DT_FLOAT: *out = DType::kFloat32; return true;
    case smdebug::DT_DOUBLE: *out = DType::kFloat64; return true;
    case smdebug::DT_HALF: *out = DType::kFloat16; return true;
    case smdebug::DT_BFLOAT16: *out = DType::kBFloat16; return true;
    case smdebug::DT_INT8: *out = DType::kInt8; return true;  // smdebug reads it as uint8 (bug)
    case smdebug::DT_INT16: *out = DType::kInt16; return true;
    case smdebug::DT_INT32: *out = DType::kInt32; return true;
    case smdebug::DT_INT64: *out = DType::kInt64; return true;
    case smdebug::DT_UINT8: *out = DType::kUInt8; return true;
    case smdebug::DT_BOOL: *out = DType::kBool; return true;
    case smdebug::DT_STRING: *out = DType::kString; return true;
    default: return false;
  }
}

template <typename T, typename Repeated>
std::string packValues(const Repeated& values) {
  std::string out(values.size() * sizeof(T), '\0');
  for (int i = 0; i < values.size(); ++i) {
    const T v = static_cast<T>(values.Get(i));
    std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
  }
  return out;
}

// The typed *_val fallbacks smdebug's reader uses when tensor_content is empty.
std::string fallbackValues(const smdebug::TensorProto& t, DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return packValues<float>(t.float_val());
    case DType::kFloat64: return packValues<double>(t.double_val());
    case DType::kFloat16: return packValues<uint16_t>(t.half_val());
    case DType::kBFloat16: return packValues<uint16_t>(t.half_val());
    case DType::kInt8: return packValues<int8_t>(t.int_val());
    case DType::kInt16: return packValues<int16_t>(t.int_val());
    case DType::kInt32: return packValues<int32_t>(t.int_val());
    case DType::kUInt8: return packValues<uint8_t>(t.int_val());
    case DType::kInt64: return packValues<int64_t>(t.int64_val());
    case DType::kBool: return packValues<uint8_t>(t.bool_val());
    case DType::kString: return {};
  }
  return {};
}

// Bounds for what a (possibly corrupted) file may make us allocate: 2^40 elements is far
// above any real tensor; the version-0 "repeat one value" fill is capped at 1 GiB.
constexpr uint64_t kMaxElements = uint64_t{1} << 40;
constexpr size_t kMaxRepeatFillBytes = size_t{1} << 30;

}  // namespace

std::string encodeTensorEvent(const TensorEventInfo& info, TensorData&& tensor) {
  smdebug::Event event;
  event.set_wall_time(info.wallTime);
  event.set_step(info.globalStep);
  smdebug::Summary::Value* value = event.mutable_summary()->add_value();
  value->set_tag(info.name);
  auto* metadata = value->mutable_metadata();
  auto* modeStep = metadata->add_plugin_data();
  modeStep->set_plugin_name("mode_step");
  modeStep->set_content(std::to_string(info.modeStep));
  auto* mode = metadata->add_plugin_data();
  mode->set_plugin_name("mode");
  mode->set_content(std::to_string(static_cast<int>(info.mode)));
  smdebug::TensorProto* proto = value->mutable_tensor();
  proto->set_dtype(toProtoDType(tensor.dtype));
  for (int64_t size : tensor.shape) {
    auto* dim = proto->mutable_tensor_shape()->add_dim();
    dim->set_size(size);
    dim->set_name(info.name + "_" + std::to_string(size));
  }
  if (tensor.dtype == DType::kString) {
    for (std::string& s : tensor.strings) proto->add_string_val(std::move(s));
  } else {
    proto->mutable_tensor_content()->swap(tensor.bytes);
  }
  return event.SerializeAsString();
}

bool decodeTensorEvent(const std::string& payload, DecodedTensorEvent* out, std::string* error) {
  smdebug::Event event;
  if (!event.ParseFromString(payload)) {
    *error = "payload is not a protobuf Event";
    return false;
  }
  if (!event.has_summary() || event.summary().value_size() != 1 ||
      !event.summary().value(0).has_tensor()) {
    *error = "Event does not hold exactly one tensor summary value";
    return false;
  }
  smdebug::Summary::Value* value = event.mutable_summary()->mutable_value(0);
  out->info.name = value->tag();
  out->info.globalStep = event.step();
  out->info.wallTime = event.wall_time();
  out->info.mode = Mode::kGlobal;
  out->info.modeStep = event.step();
  out->hasModeInfo = false;
  for (const auto& plugin : value->metadata().plugin_data()) {
    try {
      if (plugin.plugin_name() == "mode_step") {
        out->info.modeStep = std::stoll(plugin.content());
        out->hasModeInfo = true;
      } else if (plugin.plugin_name() == "mode") {
        Mode m;
        if (parseModeNumber(std::stoi(plugin.content()), &m)) out->info.mode = m;
      }
    } catch (const std::exception&) {
      *error = "plugin_data \"" + plugin.plugin_name() + "\" is not a number: \"" +
               plugin.content() + "\"";
      return false;
    }
  }
  smdebug::TensorProto* proto = value->mutable_tensor();
  TensorData& t = out->tensor;
  if (!fromProtoDType(proto->dtype(), &t.dtype)) {
    *error = "unsupported tensor dtype " + std::to_string(proto->dtype());
    return false;
  }
  t.shape.clear();
  uint64_t elements = 1;
  for (const auto& dim : proto->tensor_shape().dim()) {
    if (dim.size() < 0 || (dim.size() > 0 && elements > kMaxElements / uint64_t(dim.size()))) {
      *error = "implausible dimension " + std::to_string(dim.size());
      return false;
    }
    elements *= static_cast<uint64_t>(dim.size());
    t.shape.push_back(dim.size());
  }
  if (t.dtype == DType::kString) {
    t.strings.assign(proto->string_val().begin(), proto->string_val().end());
    if (t.shape.empty()) t.shape.push_back(static_cast<int64_t>(t.strings.size()));
    return true;
  }
  t.bytes.clear();
  if (!proto->tensor_content().empty()) {
    t.bytes.swap(*proto->mutable_tensor_content());
  } else {
    t.bytes = fallbackValues(*proto, t.dtype);
  }
  const size_t width = dtypeBytes(t.dtype);
  const size_t numel = numelOf(t.shape);
  if (t.bytes.size() == width && numel > 1 && numel * width <= kMaxRepeatFillBytes) {
    // Version-0 TensorProto: one value repeated to fill the shape.
    const std::string one = t.bytes;
    t.bytes.clear();
    for (size_t i = 0; i < numel; ++i) t.bytes += one;
  }
  if (t.bytes.size() != numel * width) {
    *error = "tensor \"" + out->info.name + "\" holds " + std::to_string(t.bytes.size()) +
             " bytes, its shape and dtype need " + std::to_string(numel * width);
    return false;
  }
  return true;
}

std::string encodeTensorboardFileVersion(double wallTime) {
  tensorboard::Event event;
  event.set_wall_time(wallTime);
  event.set_file_version("brain.Event:2");
  return event.SerializeAsString();
}

namespace {
// An event at `step` holding one summary value tagged `tag`, for the caller to fill.
tensorboard::Summary::Value* summaryValue(tensorboard::Event& event, const std::string& tag, int64_t step,
                                          double wallTime) {
  event.set_wall_time(wallTime);
  event.set_step(step);
  auto* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  return v;
}
}  // namespace

std::string encodeTensorboardScalar(const std::string& tag, float value, int64_t step,
                                    double wallTime) {
  tensorboard::Event event;
  summaryValue(event, tag, step, wallTime)->set_simple_value(value);
  return event.SerializeAsString();
}

std::string encodeTensorboardHistogram(const std::string& tag, const Histogram& histogram, int64_t step,
                                       double wallTime) {
  tensorboard::Event event;
  tensorboard::HistogramProto* h = summaryValue(event, tag, step, wallTime)->mutable_histo();
  h->set_min(histogram.min);
  h->set_max(histogram.max);
  h->set_num(histogram.num);
  h->set_sum(histogram.sum);
  h->set_sum_squares(histogram.sumSquares);
  h->mutable_bucket_limit()->Add(histogram.bucketLimit.begin(), histogram.bucketLimit.end());
  h->mutable_bucket()->Add(histogram.bucket.begin(), histogram.bucket.end());
  return event.SerializeAsString();
}

}  // namespace strata::debugger
