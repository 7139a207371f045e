// Shared pieces of the debugger (tensor) rules: the base class with the report counters,
// tensor selection by collection and regex, and reductions computed from values when the
// trial has not stored them (numpy semantics: ddof=0, norms over the flattened tensor).
#pragma once

#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "rules/params.h"
#include "strata/rules.h"

namespace strata::rules {

class TensorRuleBase : public Rule {
 public:
  explicit TensorRuleBase(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  Input input() const override { return Input::kTensors; }
  std::optional<RuleReport> report() const override {
    RuleReport r = report_;
    r.details["last_violations"] = lastViolations_;
    addDetails(r);
    return r;
  }

 protected:
  virtual void addDetails(RuleReport& /*r*/) const {}
  // Counts one evaluated step; with violations, records them and returns one finding.
  std::vector<Finding> conclude(const StepInfo& step, const std::vector<std::string>& tensors,
                                const std::string& message, nlohmann::json details = nlohmann::json::object());
  // A step that was looked at (Datapoints).
  void evaluated() { ++report_.datapoints; }

  std::string name_;
  RuleReport report_;
  nlohmann::json lastViolations_ = nlohmann::json::object();  // tensor -> step of last violation
};

// collection_names ∪ tensor_regex (re.search, as smdebug), evaluated against the trial.
class TensorSelector {
 public:
  TensorSelector() = default;
  TensorSelector(std::vector<std::string> collections, const std::vector<std::string>& regexes);
  bool empty() const { return collections_.empty() && regexes_.empty(); }
  // Selected tensor names, sorted and unique.
  std::vector<std::string> select(const Trial& trial) const;
  bool matches(const std::string& name) const;  // by regex only

 private:
  std::vector<std::string> collections_;
  std::vector<std::regex> regexes_;
};

// Compiles a regex, naming the rule and the parameter on error.
std::regex compileRegex(const std::string& rule, const std::string& key, const std::string& pattern);

// The loss tensors a rule looks at: the given selector, else the "losses" collection (when
// `useLossesCollection` and present), else every tensor whose name contains "loss" (any case).
std::vector<std::string> lossTensors(const Trial& trial, const TensorSelector& given,
                                     bool useLossesCollection);
// Gradient tensors: the "gradients" collection, else names starting with "gradient".
std::vector<std::string> gradientTensors(const Trial& trial);
// Weight tensors: the "weights" collection, else names containing "weight" that are not gradients.
std::vector<std::string> weightTensors(const Trial& trial);

// A reduction of one tensor at one step: the stored one, else computed from the value.
// op: "mean", "variance", "std", "min", "max", "sum", "l1", "l2". nullopt when neither exists.
std::optional<double> reductionOf(const Trial& trial, const std::string& name, int64_t step,
                                  const std::string& op, bool abs);
double reduce(const std::vector<double>& data, const std::string& op, bool abs);

// The scalar value of a tensor at a step (the mean of its elements), nullopt when absent.
std::optional<double> scalarOf(const Trial& trial, const std::string& name, int64_t step);

// Steps of the trial that carry `name`, up to and including `upTo`, oldest first.
std::vector<StepInfo> stepsWithTensor(const Trial& trial, const std::string& name, int64_t upTo);

}  // namespace strata::rules
