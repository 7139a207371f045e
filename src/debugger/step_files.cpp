#include "debugger/step_files.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "debugger/event_codec.h"
#include "debugger/naming.h"
#include "debugger/record.h"

namespace strata::debugger {

StepFileWriter::StepFileWriter(std::string trialDir, std::string worker, int64_t globalStep,
                               Mode mode, int64_t modeStep, bool durable)
    : trialDir_(std::move(trialDir)), worker_(std::move(worker)), globalStep_(globalStep),
      durable_(durable) {
  index_.mode = mode;
  index_.modeStep = modeStep;
  index_.eventFileName = eventFileRelPath(globalStep_, worker_);
}

StepFileWriter::~StepFileWriter() {
  if (file_ && !published_) {
    const std::string tmp = file_->path();
    file_.reset();
    std::remove(tmp.c_str());
  }
}

void StepFileWriter::writeTensor(const std::string& name, TensorData&& tensor, double wallTime) {
  if (!file_) {
    const std::string path = trialDir_ + "/" + index_.eventFileName;
    makeDirectories(std::filesystem::path(path).parent_path().string());
    file_ = std::make_unique<AppendFile>(path + kTempSuffix);
  }
  TensorEventInfo info;
  info.name = name;
  info.globalStep = globalStep_;
  info.mode = index_.mode;
  info.modeStep = index_.modeStep;
  info.wallTime = wallTime;
  const std::string payload = encodeTensorEvent(info, std::move(tensor));
  char header[kRecordHeaderBytes];
  encodeRecordHeader(payload.size(), header);
  const uint32_t footer = recordFooter(payload, Footer::kSmdebugMagic);
  char tail[4];
  for (int i = 0; i < 4; ++i) tail[i] = static_cast<char>((footer >> (8 * i)) & 0xFFu);
  const uint64_t start = file_->size();
  file_->append(header, sizeof(header));
  file_->append(payload.data(), payload.size());
  file_->append(tail, sizeof(tail));
  index_.tensors.push_back({name, start, file_->size() - start});
}

void StepFileWriter::addShape(const std::string& name, const std::vector<int64_t>& shape) {
  index_.shapes.push_back({name, name, shape});
}

void StepFileWriter::publish() {
  if (published_ || (!file_ && index_.shapes.empty())) return;
  const Durability durability = durable_ ? Durability::kFileSynced : Durability::kAtomicOnly;
  if (file_) {
    const std::string tmp = file_->path();
    file_->close();
    publishFile(tmp, trialDir_ + "/" + index_.eventFileName, durability);
  }
  published_ = true;
  writeFileAtomically(trialDir_ + "/" + indexFileRelPath(globalStep_, worker_), indexFileJson(index_),
                      durability);
}

TensorboardWriter::TensorboardWriter(std::string trialDir, std::string worker)
    : trialDir_(std::move(trialDir)), worker_(std::move(worker)) {}

AppendFile& TensorboardWriter::fileFor(Mode mode, double wallTime) {
  auto& slot = files_[mode];
  if (!slot) {
    char host[256] = "localhost";
    gethostname(host, sizeof(host) - 1);
    char name[512];
    std::snprintf(name, sizeof(name), "events.out.tfevents.%010lld.%s.%d",
                  static_cast<long long>(wallTime), host, static_cast<int>(getpid()));
    const std::string dir =
        trialDir_ + "/" + kTensorboardDir + "/" + modeName(mode) + "/" + worker_;
    makeDirectories(dir);
    slot = std::make_unique<AppendFile>(dir + "/" + name);
    std::string record;
    appendRecord(record, encodeTensorboardFileVersion(wallTime), Footer::kPayloadCrc);
    slot->append(record.data(), record.size());
  }
  return *slot;
}

void TensorboardWriter::writeScalar(Mode mode, const std::string& tag, double value, int64_t step,
                                    double wallTime) {
  std::string record;
  appendRecord(record, encodeTensorboardScalar(tag, static_cast<float>(value), step, wallTime),
               Footer::kPayloadCrc);
  fileFor(mode, wallTime).append(record.data(), record.size());
}

void TensorboardWriter::writeHistogram(Mode mode, const std::string& tag, const Histogram& histogram,
                                       int64_t step, double wallTime) {
  std::string record;
  appendRecord(record, encodeTensorboardHistogram(tag, histogram, step, wallTime), Footer::kPayloadCrc);
  fileFor(mode, wallTime).append(record.data(), record.size());
}

void TensorboardWriter::flush() {
  for (auto& [mode, file] : files_) file->flush();
}

void TensorboardWriter::close() {
  for (auto& [mode, file] : files_) file->close();
  files_.clear();
}

}  // namespace strata::debugger
