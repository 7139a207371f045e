#include "profiler/timeline_file_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "core/atomic_file.h"
#include "core/logging.h"
#include "profiler/json_util.h"
#include "profiler/layout.h"
#include "profiler/system_monitor.h"
#include "profiler/timeline_reader.h"

namespace strata::profiler {
namespace {

namespace fs = std::filesystem;

// Every line ends with ",\n"; closing replaces the last one with "\n]\n".
constexpr char kLineEnd[] = ",\n";
constexpr size_t kLineEndBytes = 2;

[[noreturn]] void throwIo(const std::string& what, const std::string& path) {
  throw std::runtime_error("cannot " + what + " " + path + ": " + std::strerror(errno));
}

// A rename target that does not exist yet: two files closed with the same last end get
// stamps 1 µs apart rather than one overwriting the other.
fs::path freeTracePath(const std::string& root, int64_t stampUs, const std::string& nodeId) {
  for (;; ++stampUs) {
    const fs::path candidate = fs::path(root) / traceRelPath(stampUs, nodeId);
    std::error_code ec;
    if (!fs::exists(candidate, ec)) return candidate;
  }
}

}  // namespace

bool shouldRotate(size_t fileBytes, int64_t openedAtUs, int64_t nowUs,
                  const RotationPolicy& policy) {
  const int64_t intervalUs =
      std::chrono::duration_cast<std::chrono::microseconds>(policy.closeInterval).count();
  return fileBytes > policy.maxFileBytes || nowUs - openedAtUs >= intervalUs;
}

TimelineFileWriter::TimelineFileWriter(std::string profilerRoot, std::string nodeId,
                                       TimelineFormatter formatter, RotationPolicy policy)
    : root_(std::move(profilerRoot)),
      nodeId_(std::move(nodeId)),
      formatter_(std::move(formatter)),
      policy_(policy) {}

TimelineFileWriter::~TimelineFileWriter() {
  try {
    closeFile();
  } catch (const std::exception& e) {
    STRATA_LOG(kWarn, kProf, "timeline: ", e.what());
  }
}

void TimelineFileWriter::recoverLeftover() {
  checkedLeftover_ = true;
  std::optional<std::string> text = readTextFile(tmpPath_);
  if (!text) return;
  const size_t lastWholeLine = text->rfind("},\n");
  std::error_code ec;
  if (lastWholeLine == std::string::npos) {
    fs::remove(tmpPath_, ec);  // not one whole event
    return;
  }
  text->resize(lastWholeLine + 1);
  *text += "\n]\n";
  int64_t maxEndUs = 0;
  for (const TraceEvent& e : parseTraceText(*text, nodeId_, "PythontimelineMetrics").events)
    maxEndUs = std::max(maxEndUs, e.endUs);
  const fs::path target = freeTracePath(root_, maxEndUs, nodeId_);
  writeFileAtomically(target.string(), *text, Durability::kAtomicOnly);
  fs::remove(tmpPath_, ec);
  closedFiles_.push_back(target.string());
  STRATA_LOG(kInfo, kProf, "timeline: recovered ", tmpPath_, " left by an earlier run as ",
             target.string());
}

void TimelineFileWriter::open(int64_t nowUs) {
  tmpPath_ = (fs::path(root_) / openTraceRelPath(nodeId_)).string();
  std::error_code ec;
  fs::create_directories(fs::path(tmpPath_).parent_path(), ec);
  if (!checkedLeftover_) recoverLeftover();
  file_ = openOutputFile(tmpPath_, "w");
  if (file_ == nullptr) throwIo("open", tmpPath_);
  fileBytes_ = 0;
  openedAtUs_ = nowUs;
  maxEndUs_ = 0;
  formatter_.beginFile();
  appendText("[\n");
}

void TimelineFileWriter::appendText(const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size()) throwIo("write", tmpPath_);
  fileBytes_ += text.size();
}

void TimelineFileWriter::write(const std::vector<TimelineEvent>& events, int64_t nowUs) {
  if (events.empty()) return;
  maybeRotate(nowUs);
  if (file_ == nullptr) open(nowUs);
  std::string text;
  for (const TimelineEvent& e : events) {
    formatter_.append(e, text);
    maxEndUs_ = std::max(maxEndUs_, e.startUs + std::max<int64_t>(e.durUs, 0));
  }
  appendText(text);
  if (std::fflush(file_) != 0) throwIo("flush", tmpPath_);
}

void TimelineFileWriter::maybeRotate(int64_t nowUs) {
  if (file_ != nullptr && shouldRotate(fileBytes_, openedAtUs_, nowUs, policy_)) closeFile();
}

void TimelineFileWriter::closeFile() {
  if (file_ == nullptr) return;
  std::FILE* file = file_;
  file_ = nullptr;
  // Replace the last ",\n" by "\n]\n" so the file is one valid JSON array.
  bool ok = std::fflush(file) == 0 &&
            ftruncate(fileno(file), static_cast<off_t>(fileBytes_ - kLineEndBytes)) == 0 &&
            std::fseek(file, 0, SEEK_END) == 0 && std::fputs("\n]\n", file) >= 0;
  ok = (std::fclose(file) == 0) && ok;
  if (!ok) throwIo("close", tmpPath_);
  const fs::path target = freeTracePath(root_, maxEndUs_, nodeId_);
  // A timeline is rewritten every rotation and recoverable from its open file: atomic is enough.
  publishFile(tmpPath_, target.string(), Durability::kAtomicOnly);
  closedFiles_.push_back(target.string());
}

// --- StepTimeWriter ----------------------------------------------------------------

std::string formatStepLine(const StepRecord& s, int rank, const std::string& nodeId) {
  return "{\"rank\":" + std::to_string(rank) + ",\"node\":" + jsonQuote(nodeId) +
         ",\"step\":" + std::to_string(s.step) + ",\"mode\":\"" + std::string(modeName(s.mode)) +
         "\",\"start_us\":" + std::to_string(s.startUs) + ",\"dur_us\":" + std::to_string(s.durUs) +
         "}";
}

StepTimeWriter::StepTimeWriter(std::string profilerRoot, std::string nodeId, int rank)
    : path_((fs::path(profilerRoot) / stepTimesRelPath(nodeId)).string()),
      nodeId_(std::move(nodeId)),
      rank_(rank) {}

StepTimeWriter::~StepTimeWriter() { close(); }

void StepTimeWriter::close() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
}

void StepTimeWriter::write(const std::vector<StepRecord>& steps) {
  if (steps.empty()) return;
  if (file_ == nullptr) {
    std::error_code ec;
    fs::create_directories(fs::path(path_).parent_path(), ec);
    file_ = openOutputFile(path_, "a");
    if (file_ == nullptr) throwIo("open", path_);
  }
  std::string text;
  for (const StepRecord& s : steps) text += formatStepLine(s, rank_, nodeId_) + "\n";
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0) {
    close();
    throwIo("write", path_);
  }
}

}  // namespace strata::profiler
