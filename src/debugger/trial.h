// Reads a tensor trial written by our Hook or by smdebug itself (specs/smdebug.md §1):
// the C++ counterpart of smdebug's create_trial(path), used by the rule engine and by
// `strata trial`. Names map to smdebug's: tensorNames = tensor_names, steps = steps,
// tensor(name).value(step, worker) = value, values = values, reductionValue =
// reduction_value, workers = workers, waitForSteps = wait_for_steps.
//
// Semantics kept from smdebug:
// - steps() returns COMPLETE steps only: a global step is complete when as many distinct
//   workers as _meta.num_workers wrote something at it, or a later step is complete, or
//   training_job_end.ts exists (Trial.steps / has_passed_step).
// - Steps of a mode are mode steps; Mode::kGlobal means global steps across all modes.
// - value(step) without a worker picks the lexicographically first worker.
// - reduction_value returns a stored reduction if there is one, else computes it from the
//   raw tensor, here with the conventions of reductions.h (flattened norms, ddof 0).
// - A collection's tensors are its tensor_names plus the saved names its include_regex
//   finds (unanchored search).
// Differences: a corrupt or truncated file is reported (problems(), a warning log and an
// exception naming the path and byte offset when its value is asked for) and skipped, never
// a crash; DT_INT8 reads as int8 (smdebug reads it as uint8).
//
// Threading: a Trial and its TrialTensors are used by one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/errors.h"
#include "debugger/reductions.h"
#include "debugger/types.h"

namespace strata::debugger {

// Asked for a tensor, step or worker the trial does not have.
class TensorUnavailable : public strata::Error {
 public:
  using Error::Error;
};

struct TrialOptions {
  // How long the constructor waits for the first collections file (smdebug waits forever).
  // Without one, num_workers is taken as the number of workers seen in index files.
  std::chrono::milliseconds collectionsTimeout{0};
  std::chrono::milliseconds pollInterval{200};  // waitForSteps' refresh period
};

class Trial;

// Where one saved record lives.
struct TensorLocation {
  std::string eventFile;  // absolute path
  uint64_t offset = 0;
  uint64_t length = 0;
};

class TrialTensor {
 public:
  TrialTensor(const Trial* trial, std::string name) : trial_(trial), name_(std::move(name)) {}
  const std::string& name() const { return name_; }

  // Steps at which this tensor has a raw value or a reduction (complete steps unless
  // showIncomplete), as steps of `mode`.
  std::vector<int64_t> steps(Mode mode = Mode::kGlobal, bool showIncomplete = false) const;
  std::vector<std::string> workers(int64_t step, Mode mode = Mode::kGlobal) const;
  bool hasValue(int64_t step, Mode mode = Mode::kGlobal) const;
  // The raw value. Throws TensorUnavailable (no such step/worker, or only reductions saved)
  // or strata::Error (unreadable file: path and offset in the message).
  TensorData value(int64_t step, const std::string& worker = "", Mode mode = Mode::kGlobal) const;
  // Raw values at every step that has one (first worker, or `worker`).
  std::map<int64_t, TensorData> values(Mode mode = Mode::kGlobal, const std::string& worker = "") const;
  double reductionValue(int64_t step, ReductionOp op, bool abs = false, Mode mode = Mode::kGlobal,
                        const std::string& worker = "") const;
  // Stored reductions at a step, by config name ("abs_l2_norm").
  std::vector<Reduction> storedReductions(int64_t step, Mode mode = Mode::kGlobal) const;

 private:
  friend class Trial;
  struct Saved {
    std::map<std::string, TensorLocation> raw;                               // by worker
    std::map<std::string, std::vector<std::pair<Reduction, TensorLocation>>> reductions;
  };
  const Saved* savedAt(int64_t step, Mode mode, int64_t* globalStep) const;
  std::string pickWorker(const std::map<std::string, TensorLocation>& byWorker,
                         const std::string& worker, int64_t globalStep) const;

  const Trial* trial_;
  std::string name_;
  std::map<int64_t, Saved> byGlobalStep_;
};

class Trial {
 public:
  explicit Trial(std::string path, TrialOptions options = {});
  Trial(const Trial&) = delete;
  Trial& operator=(const Trial&) = delete;

  const std::string& path() const { return path_; }
  // Reads index and collections files that appeared since the last refresh.
  void refresh();
  bool hasTrainingEnded() const { return ended_; }

  int numWorkers() const { return numWorkers_; }
  std::vector<std::string> workers() const;  // from the collections files (smdebug)
  std::vector<std::string> collectionNames() const;
  // All saved names (reductions are listed under their tensor), or those of a collection,
  // or those saved in `mode`; sorted.
  std::vector<std::string> tensorNames(const std::string& collection = "",
                                       Mode mode = Mode::kGlobal) const;
  std::vector<int64_t> steps(Mode mode = Mode::kGlobal, bool showIncomplete = false) const;
  bool hasTensor(const std::string& name) const { return tensors_.count(name) != 0; }
  const TrialTensor& tensor(const std::string& name) const;  // throws TensorUnavailable

  enum class WaitResult { kAvailable, kEnded, kTimeout };
  // Refreshes until every step in `steps` (of `mode`) is complete, training has ended
  // without them (kEnded), or `timeout` passes (kTimeout).
  WaitResult waitForSteps(const std::vector<int64_t>& steps, Mode mode,
                          std::chrono::milliseconds timeout);

  // What is known about a global step (nullopt: nothing written at it yet).
  struct StepSummary {
    Mode mode = Mode::kGlobal;
    int64_t modeStep = 0;
    std::vector<std::string> workers;  // those that wrote anything at it
    bool complete = false;
  };
  std::optional<StepSummary> stepSummary(int64_t globalStep) const;

  // Global step of (mode, modeStep); -1 if unknown.
  int64_t globalStep(Mode mode, int64_t modeStep) const;
  bool isComplete(int64_t globalStep) const;
  // Files skipped or unreadable so far: "path: reason".
  const std::vector<std::string>& problems() const { return problems_; }

  // Reads and decodes one record (throws strata::Error naming the path and offset).
  TensorData readTensor(const TensorLocation& where, const std::string& name) const;

 private:
  friend class TrialTensor;
  struct StepInfo {
    Mode mode = Mode::kGlobal;
    int64_t modeStep = 0;
    std::set<std::string> workers;
  };
  void loadCollections();
  void readIndexFile(const std::string& relPath);
  void addProblem(const std::string& what);
  void updateCompleteness();
  int effectiveNumWorkers() const;

  std::string path_;
  TrialOptions options_;
  int numWorkers_ = 0;  // 0: no collections file yet
  std::set<std::string> workers_;       // from collections files
  std::set<std::string> indexWorkers_;  // seen in index file names
  std::map<std::string, std::vector<std::string>> collectionRegex_;
  std::map<std::string, std::set<std::string>> collectionNames_;
  std::set<std::string> readIndexFiles_;
  std::set<std::string> readCollectionFiles_;
  std::map<int64_t, StepInfo> steps_;
  std::map<Mode, std::map<int64_t, int64_t>> modeToGlobal_;
  std::map<Mode, std::set<std::string>> namesByMode_;
  std::map<std::string, std::unique_ptr<TrialTensor>> tensors_;
  int64_t lastCompleteStep_ = -1;
  bool ended_ = false;
  std::vector<std::string> problems_;
};

}  // namespace strata::debugger
