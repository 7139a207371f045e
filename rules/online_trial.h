// The trial an in-process (online) rule engine sees: the complete steps the debugger hook of
// this rank handed over (rules/step_feed.h), with the same names, values and reductions the
// files get, so rules give the verdicts they give offline on the files.
//
// Memory is bounded: each tensor keeps its values at its newest `retainSteps` saved steps
// (what the rules look back over: UnchangedTensor's num_steps, WeightUpdateRatio's previous
// step; see retainedStepsFor in online_engine.h); older values and steps without retained
// data are dropped. Names, collections and the modes seen are kept for the whole run.
// Collection membership is by the collections' include regexes, as the trial reader does.
//
// Cost per step (the engine runs on every step): a collection's regexes are compiled when a
// rule first asks for its tensors, each name is matched against them once, and the member
// list is kept until a new name arrives; nothing is re-scanned at every step.
//
// Threading: not thread-safe; the engine's thread owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "rules/tensor_store.h"
#include "strata/rules.h"

namespace strata::rules {

class OnlineTrial final : public InMemoryTrial {
 public:
  explicit OnlineTrial(size_t retainSteps = 4) : retain_(retainSteps < 1 ? 1 : retainSteps) {}

  // Collection -> include regexes (searched unanchored). Bad regexes are skipped.
  void setCollections(const std::vector<std::pair<std::string, std::vector<std::string>>>& collections);
  // Adds a complete step with its data. Values replace earlier ones of the same (name, step).
  void addStep(const StepInfo& info);
  void addValue(int64_t step, const std::string& name, TensorValue value);
  void addReduction(int64_t step, const std::string& name, const std::string& op, bool abs, double value);
  // Applies the retention to the tensors touched since the last call.
  void evict();
  void setFinished(bool f = true) { finished_ = f; }
  // Collections that other ranks fill (a pipeline's losses live on the last stage): they
  // count as holding tensors for the rules' fallbacks, as they do in the run's files.
  void setFilledElsewhere(std::vector<std::string> collections) { filledElsewhere_ = std::move(collections); }
  size_t retainedValues() const { return data_.size(); }

  std::vector<std::string> collections() const override;
  std::vector<std::string> tensorNames(const std::string& collection = "") const override;
  bool collectionHasTensors(const std::string& collection) const override;
  std::vector<StepInfo> steps() const override;
  std::optional<double> lastUpdateSec() const override { return lastUpdate_; }
  bool finished() const override { return finished_; }
  bool hasMode(Mode mode) const override { return (modes_ >> static_cast<int>(mode)) & 1u; }
  std::vector<StepInfo> stepsAfter(int64_t step) const override;

 private:
  void touch(const std::string& name, int64_t step);
  void dropData(const std::string& name, int64_t step);

  size_t retain_;
  std::map<int64_t, StepInfo> steps_;
  std::map<int64_t, int> dataPerStep_;  // retained (name, step) entries per step
  std::map<std::string, std::deque<int64_t>> stepsOf_;  // per tensor: its retained steps, oldest first
  std::set<std::string> touched_;
  std::set<std::string> names_;
  uint64_t namesVersion_ = 0;  // bumped when names_ gets a new name
  // A collection: its include regexes, compiled on first use, and its members as of
  // namesVersion (sorted as names_), with each name's verdict kept.
  struct Collection {
    std::string name;
    std::vector<std::string> patterns;
    bool compiled = false;
    std::vector<std::regex> regexes;
    uint64_t version = UINT64_MAX;
    std::vector<std::string> members;
    std::unordered_map<std::string, bool> matched;
  };
  mutable std::vector<Collection> collections_;
  std::vector<std::string> filledElsewhere_;
  unsigned modes_ = 0;
  std::optional<double> lastUpdate_;
  bool finished_ = false;
};

}  // namespace strata::rules
