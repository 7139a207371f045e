#include "debugger/trial.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <regex>
#include <thread>

#include "core/logging.h"
#include "debugger/event_codec.h"
#include "debugger/file_util.h"
#include "debugger/naming.h"
#include "debugger/record.h"
#include "debugger/trial_files.h"

namespace strata::debugger {
namespace fs = std::filesystem;
namespace {

// Reads `file` and parses it into *out with parse(text, out, error): nothing when both
// worked, else why not.
template <typename T>
std::optional<std::string> readParsed(const std::string& file, bool (*parse)(const std::string&, T*, std::string*),
                                      T* out) {
  std::string text, error;
  if (readWholeFile(file, &text, &error) && parse(text, out, &error)) return std::nullopt;
  return error;
}

}  // namespace

Trial::Trial(std::string path, TrialOptions options)
    : path_(std::move(path)), options_(options) {
  STRATA_CHECK(fs::is_directory(path_), "trial directory \"", path_, "\" does not exist");
  const auto deadline = std::chrono::steady_clock::now() + options_.collectionsTimeout;
  loadCollections();
  while (numWorkers_ == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(options_.pollInterval);
    loadCollections();
  }
  refresh();
}

void Trial::addProblem(const std::string& what) {
  STRATA_LOG(kWarn, kAllSubsys, "trial: skipping ", what);
  problems_.push_back(what);
}

void Trial::loadCollections() {
  const std::string dir = path_ + "/" + kCollectionsDir;
  for (const std::string& rel : listFilesRecursive(dir)) {
    if (readCollectionFiles_.count(rel)) continue;
    std::string worker;
    if (!parseCollectionsFileName(fs::path(rel).filename().string(), &worker)) continue;
    readCollectionFiles_.insert(rel);
    const std::string file = dir + "/" + rel;
    CollectionsFile parsed;
    if (const auto failure = readParsed(file, parseCollectionsFile, &parsed)) {
      addProblem(file + ": " + *failure);
      continue;
    }
    workers_.insert(worker);
    if (numWorkers_ == 0) numWorkers_ = parsed.numWorkers;
    for (auto& [name, entry] : parsed.collections) {
      auto& regex = collectionRegex_[name];
      for (const std::string& r : entry.includeRegex)
        if (std::find(regex.begin(), regex.end(), r) == regex.end()) regex.push_back(r);
      collectionNames_[name].insert(entry.tensorNames.begin(), entry.tensorNames.end());
    }
  }
}

void Trial::readIndexFile(const std::string& relPath) {
  const std::string file = path_ + "/" + kIndexDir + "/" + relPath;
  int64_t step = 0;
  std::string worker;
  if (!parseStepFileName(fs::path(relPath).filename().string(), &step, &worker)) return;
  if (fs::path(relPath).extension() != ".json") return;
  readIndexFiles_.insert(relPath);
  IndexFile index;
  if (const auto failure = readParsed(file, parseIndexFile, &index)) {
    addProblem(file + ": " + *failure);
    return;
  }
  indexWorkers_.insert(worker);
  const std::string eventFile = path_ + "/" + index.eventFileName;
  for (const IndexEntry& e : index.tensors) {
    std::string name = e.tensorName;
    Reduction reduction;
    std::string base;
    const bool isReduction = parseReductionTensorName(name, &base, &reduction);
    if (isReduction) name = base;
    auto& slot = tensors_[name];
    if (!slot) slot = std::make_unique<TrialTensor>(this, name);
    auto& saved = slot->byGlobalStep_[step];
    const TensorLocation where{eventFile, e.startIdx, e.length};
    if (isReduction) {
      saved.reductions[worker].emplace_back(reduction, where);
    } else {
      saved.raw[worker] = where;
    }
    namesByMode_[index.mode].insert(name);
    StepInfo& info = steps_[step];
    info.mode = index.mode;
    info.modeStep = index.modeStep;
    info.workers.insert(worker);
    if (index.mode != Mode::kGlobal) modeToGlobal_[index.mode].emplace(index.modeStep, step);
  }
  // shape_payload-only entries carry no value; they are listed but not readable here.
}

int Trial::effectiveNumWorkers() const {
  if (numWorkers_ > 0) return numWorkers_;
  return std::max<int>(1, static_cast<int>(indexWorkers_.size()));
}

void Trial::updateCompleteness() {
  const auto needed = static_cast<size_t>(effectiveNumWorkers());
  for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) {
    if (it->second.workers.size() >= needed) {
      lastCompleteStep_ = std::max(lastCompleteStep_, it->first);
      break;
    }
  }
  if (ended_ && !steps_.empty()) lastCompleteStep_ = std::max(lastCompleteStep_, steps_.rbegin()->first);
}

void Trial::refresh() {
  // Check the end marker first: files published before it are then certainly listed below.
  const bool endedNow = fileExists(path_ + "/" + kEndOfJobFile);
  if (numWorkers_ == 0 || static_cast<int>(workers_.size()) < numWorkers_) loadCollections();
  for (const std::string& rel : listFilesRecursive(path_ + "/" + kIndexDir)) {
    if (!readIndexFiles_.count(rel)) readIndexFile(rel);
  }
  ended_ = ended_ || endedNow;
  updateCompleteness();
}

std::vector<std::string> Trial::workers() const {
  std::set<std::string> all = workers_;
  if (all.empty()) all = indexWorkers_;
  return {all.begin(), all.end()};
}

std::vector<std::string> Trial::collectionNames() const {
  std::vector<std::string> out;
  for (const auto& [name, regex] : collectionRegex_) out.push_back(name);
  return out;
}

std::vector<std::string> Trial::tensorNames(const std::string& collection, Mode mode) const {
  std::vector<std::string> out;
  std::vector<std::regex> regexes;
  if (!collection.empty()) {
    const auto it = collectionRegex_.find(collection);
    STRATA_CHECK_WITH(debugger::TensorUnavailable, it != collectionRegex_.end(), "trial \"", path_,
                      "\" has no collection \"", collection, "\"");
    for (const std::string& r : it->second) {
      try {
        regexes.emplace_back(r, std::regex::ECMAScript);
      } catch (const std::regex_error&) {
        STRATA_LOG(kWarn, kAllSubsys, "trial: collection \"", collection,
                   "\" has a regex C++ cannot compile: \"", r, "\"");
      }
    }
  }
  const std::set<std::string>* listed = nullptr;
  if (!collection.empty()) listed = &collectionNames_.at(collection);
  for (const auto& [name, tensor] : tensors_) {
    if (mode != Mode::kGlobal) {
      const auto it = namesByMode_.find(mode);
      if (it == namesByMode_.end() || !it->second.count(name)) continue;
    }
    if (!collection.empty()) {
      bool member = listed->count(name) != 0;
      for (size_t i = 0; !member && i < regexes.size(); ++i) member = std::regex_search(name, regexes[i]);
      if (!member) continue;
    }
    out.push_back(name);
  }
  return out;
}

bool Trial::isComplete(int64_t globalStep) const {
  const auto it = steps_.find(globalStep);
  if (it == steps_.end()) return false;
  return ended_ || globalStep <= lastCompleteStep_ ||
         it->second.workers.size() >= static_cast<size_t>(effectiveNumWorkers());
}

std::vector<int64_t> Trial::steps(Mode mode, bool showIncomplete) const {
  std::vector<int64_t> out;
  if (mode == Mode::kGlobal) {
    for (const auto& [step, info] : steps_)
      if (showIncomplete || isComplete(step)) out.push_back(step);
    return out;
  }
  const auto it = modeToGlobal_.find(mode);
  if (it == modeToGlobal_.end()) return out;
  for (const auto& [modeStep, global] : it->second)
    if (showIncomplete || isComplete(global)) out.push_back(modeStep);
  return out;
}

std::optional<Trial::StepSummary> Trial::stepSummary(int64_t globalStep) const {
  const auto it = steps_.find(globalStep);
  if (it == steps_.end()) return std::nullopt;
  StepSummary s;
  s.mode = it->second.mode;
  s.modeStep = it->second.modeStep;
  s.workers.assign(it->second.workers.begin(), it->second.workers.end());
  s.complete = isComplete(globalStep);
  return s;
}

int64_t Trial::globalStep(Mode mode, int64_t modeStep) const {
  if (mode == Mode::kGlobal) return steps_.count(modeStep) ? modeStep : -1;
  const auto it = modeToGlobal_.find(mode);
  if (it == modeToGlobal_.end()) return -1;
  const auto s = it->second.find(modeStep);
  return s == it->second.end() ? -1 : s->second;
}

const TrialTensor& Trial::tensor(const std::string& name) const {
  const auto it = tensors_.find(name);
  STRATA_CHECK_WITH(debugger::TensorUnavailable, it != tensors_.end(), "trial \"", path_,
                    "\" has no tensor \"", name, "\"");
  return *it->second;
}

Trial::WaitResult Trial::waitForSteps(const std::vector<int64_t>& wanted, Mode mode,
                                      std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    refresh();
    const bool all = std::all_of(wanted.begin(), wanted.end(), [&](int64_t s) {
      const int64_t g = globalStep(mode, s);
      return g >= 0 && isComplete(g);
    });
    if (all) return WaitResult::kAvailable;
    if (ended_) return WaitResult::kEnded;
    if (std::chrono::steady_clock::now() >= deadline) return WaitResult::kTimeout;
    std::this_thread::sleep_for(options_.pollInterval);
  }
}

TensorData Trial::readTensor(const TensorLocation& where, const std::string& name) const {
  std::string bytes, error;
  if (!readFileRange(where.eventFile, where.offset, where.length, &bytes, &error))
    STRATA_THROW(Error, "tensor \"", name, "\": ", error);
  RecordView record;
  if (!parseRecord(bytes, 0, FooterCheck::kMagicOrCrc, &record, &error))
    STRATA_THROW(Error, "tensor \"", name, "\" in \"", where.eventFile, "\" at byte offset ",
                 where.offset, ": ", error);
  DecodedTensorEvent event;
  if (!decodeTensorEvent(std::string(record.payload), &event, &error))
    STRATA_THROW(Error, "tensor \"", name, "\" in \"", where.eventFile, "\" at byte offset ",
                 where.offset, ": ", error);
  return std::move(event.tensor);
}

}  // namespace strata::debugger
