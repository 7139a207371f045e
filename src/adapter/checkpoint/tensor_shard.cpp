#include "adapter/checkpoint/tensor_shard.h"

#include <caffe2/serialize/inline_container.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/errors.h"
#include "strata/tensor_ops.h"
#include "strata/types.h"

namespace strata::detail {
namespace {

namespace ck = strata::checkpoint;

// Positioned reads until `numBytes` arrived (pread may return less).
void readAt(int fd, uint64_t offset, void* out, size_t numBytes, const std::string& file) {
  auto* bytes = static_cast<char*>(out);
  while (numBytes > 0) {
    const ssize_t n = ::pread(fd, bytes, numBytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    STRATA_CHECK(n > 0, "checkpoint file ", file, ": read at offset ", offset, " failed: ",
                 n == 0 ? "unexpected end of file" : std::strerror(errno));
    bytes += n;
    offset += static_cast<uint64_t>(n);
    numBytes -= static_cast<size_t>(n);
  }
}

}  // namespace

// The names are strata's DType names (include/strata/types.h), the one table of them.
std::string dtypeName(c10::ScalarType type) {
  DType dtype;
  STRATA_CHECK(dtypeOf(type, &dtype), "checkpoint: tensors of dtype ", c10::toString(type), " are not supported");
  return strata::dtypeName(dtype);
}

size_t entryBytes(const ck::TensorEntry& e) {
  size_t n = c10::elementSize(dtypeFromName(e.dtype));
  for (int64_t d : e.shape) n *= static_cast<size_t>(d);
  return n;
}

c10::ScalarType dtypeFromName(const std::string& name) {
  DType dtype;
  STRATA_CHECK(parseDTypeName(name, &dtype) && dtype != DType::kString, "checkpoint: unknown dtype \"", name, "\"");
  return scalarTypeOf(dtype);
}

ck::TensorEntry describeTensor(const std::string& path, const torch::Tensor& value, bool buffer) {
  ck::TensorEntry e;
  e.path = path;
  e.dtype = dtypeName(value.scalar_type());
  e.shape = value.sizes().vec();
  e.buffer = buffer;
  return e;
}

std::string archiveBytes(torch::serialize::OutputArchive& archive) {
  std::string bytes;
  archive.save_to([&bytes](const void* data, size_t size) -> size_t {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  return bytes;
}

TensorShardWriter::TensorShardWriter(Sink sink)
    : zip_(std::make_unique<caffe2::serialize::PyTorchStreamWriter>([sink](const void* data, size_t size) -> size_t {
        sink(data, size);
        return size;
      })) {}

TensorShardWriter::~TensorShardWriter() = default;

void TensorShardWriter::addTensor(const std::string& path, const torch::Tensor& value, bool buffer) {
  ck::TensorEntry entry = describeTensor(path, value, buffer);
  const void* impl = value.unsafeGetTensorImpl();
  if (auto it = stored_.find(impl); it != stored_.end()) {
    entry.aliasOf = it->second;
    addAlias(entry);
    return;
  }
  const torch::Tensor t = value.detach().cpu().contiguous();
  addTensorBytes(entry, t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
  stored_.emplace(impl, path);
}

void TensorShardWriter::addTensorBytes(const ck::TensorEntry& entry, const void* data, size_t numBytes) {
  STRATA_CHECK(numBytes == entryBytes(entry), "checkpoint: \"", entry.path, "\" has ", numBytes, " bytes, its ",
               entry.dtype, " ", ck::formatShape(entry.shape), " needs ", entryBytes(entry));
  ck::TensorEntry e = entry;
  e.aliasOf.clear();
  e.record = "t" + std::to_string(index_.tensors.size());
  zip_->writeRecord(e.record, data, numBytes);
  index_.tensors.push_back(std::move(e));
}

void TensorShardWriter::addAlias(const ck::TensorEntry& entry) {
  STRATA_CHECK(!entry.aliasOf.empty(), "checkpoint: alias \"", entry.path, "\" names no target");
  ck::TensorEntry e = entry;
  e.record.clear();
  index_.tensors.push_back(std::move(e));
}

void TensorShardWriter::addOptimizerState(const std::string& kind, const std::string& path, const std::string& bytes) {
  STRATA_CHECK(index_.optimizerKind.empty() || index_.optimizerKind == kind, "checkpoint: optimizer kinds ",
               index_.optimizerKind, " and ", kind, " in one file");
  index_.optimizerKind = kind;
  const std::string record = "o" + std::to_string(index_.optimizer.size());
  zip_->writeRecord(record, bytes.data(), bytes.size());
  index_.optimizer.push_back({path, record});
}

void TensorShardWriter::addState(const std::string& bytes) {
  index_.stateRecord = "state";
  zip_->writeRecord(index_.stateRecord, bytes.data(), bytes.size());
}

void TensorShardWriter::finish() {
  const std::string json = ck::toJson(index_).dump(1);
  zip_->writeRecord(ck::kTensorIndexRecord, json.data(), json.size());
  zip_->writeEndOfFile();
}

TensorShardReader::TensorShardReader(const std::string& file) : file_(file), raw_(nullptr, &std::fclose) {
  try {
    zip_ = std::make_unique<caffe2::serialize::PyTorchStreamReader>(file);
  } catch (const c10::Error& e) {
    STRATA_THROW(Error, "checkpoint file ", file, " cannot be opened as a zip container: ", e.what_without_backtrace());
  }
  STRATA_CHECK(zip_->hasRecord(ck::kTensorIndexRecord), "checkpoint file ", file,
               " has no tensor index (not a by-path checkpoint file)");
  auto [data, size] = zip_->getRecord(ck::kTensorIndexRecord);
  index_ = ck::parseTensorIndex(std::string(static_cast<const char*>(data.get()), size), file);
  for (const auto& e : index_.tensors) entries_.emplace(e.path, &e);
  raw_.reset(std::fopen(file.c_str(), "rb"));
  STRATA_CHECK(raw_ != nullptr, "cannot open checkpoint file ", file, ": ", std::strerror(errno));
}

TensorShardReader::~TensorShardReader() = default;

bool TensorShardReader::isTensorShard(const std::string& file) {
  try {
    caffe2::serialize::PyTorchStreamReader zip(file);
    return zip.hasRecord(ck::kTensorIndexRecord);
  } catch (const c10::Error&) {
    return false;
  }
}

const ck::TensorEntry& TensorShardReader::storedEntry(const std::string& path) const {
  auto it = entries_.find(path);
  STRATA_CHECK(it != entries_.end(), "checkpoint file ", file_, " does not hold \"", path, "\"");
  const ck::TensorEntry* e = it->second;
  if (!e->aliasOf.empty()) e = entries_.at(e->aliasOf);
  return *e;
}

void TensorShardReader::readInto(const std::string& path, torch::Tensor& target) {
  const ck::TensorEntry& e = storedEntry(path);
  STRATA_CHECK(dtypeName(target.scalar_type()) == e.dtype && target.sizes().vec() == e.shape, "checkpoint file ", file_,
               ": \"", path, "\" is ", e.dtype, " ", ck::formatShape(e.shape), ", the model's is ",
               dtypeName(target.scalar_type()), " ", ck::formatShape(target.sizes().vec()));
  const size_t numBytes = entryBytes(e);
  const uint64_t offset = zip_->getRecordOffset(e.record);
  struct stat st {};
  STRATA_CHECK(::fstat(fileno(raw_.get()), &st) == 0 && offset + numBytes <= static_cast<uint64_t>(st.st_size),
               "checkpoint file ", file_, ": record of \"", path, "\" runs past the end of the file");
  torch::NoGradGuard noGrad;
  if (target.is_contiguous() && target.device().is_cpu()) {
    readAt(fileno(raw_.get()), offset, target.data_ptr(), numBytes, file_);
    return;
  }
  torch::Tensor staging = torch::empty(target.sizes(), target.options().device(torch::kCPU));
  readAt(fileno(raw_.get()), offset, staging.data_ptr(), numBytes, file_);
  target.copy_(staging);
}

std::string TensorShardReader::readBytes(const std::string& path) {
  const ck::TensorEntry& e = storedEntry(path);
  std::string bytes(entryBytes(e), '\0');
  readAt(fileno(raw_.get()), zip_->getRecordOffset(e.record), bytes.data(), bytes.size(), file_);
  return bytes;
}

torch::serialize::InputArchive TensorShardReader::readArchive(const std::string& record) {
  auto [data, size] = zip_->getRecord(record);
  torch::serialize::InputArchive archive;
  archive.load_from(static_cast<const char*>(data.get()), size);
  return archive;
}

}  // namespace strata::detail
