#include "rules/training/tensor_rule.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <stdexcept>

#include "rules/stats.h"

namespace strata::rules {

std::vector<Finding> TensorRuleBase::conclude(const StepInfo& step, const std::vector<std::string>& tensors,
                                              const std::string& message, nlohmann::json details) {
  if (tensors.empty()) return {};
  ++report_.ruleTriggered;
  report_.violations += static_cast<int64_t>(tensors.size());
  for (const std::string& t : tensors) lastViolations_[t] = step.step;
  Finding f;
  f.rule = name_;
  f.step = step.step;
  f.subjects = tensors;
  f.message = message;
  f.details = std::move(details);
  f.details["mode"] = modeName(step.mode);
  f.details["mode_step"] = step.modeStep;
  return {f};
}

std::regex compileRegex(const std::string& rule, const std::string& key, const std::string& pattern) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw std::invalid_argument(rule + ": parameter \"" + key + "\": invalid regular expression \"" +
                                pattern + "\": " + e.what());
  }
}

TensorSelector::TensorSelector(std::vector<std::string> collections, const std::vector<std::string>& regexes)
    : collections_(std::move(collections)) {
  for (const std::string& r : regexes) regexes_.push_back(compileRegex("tensor selection", "tensor_regex", r));
}

bool TensorSelector::matches(const std::string& name) const {
  for (const std::regex& r : regexes_)
    if (std::regex_search(name, r)) return true;
  return false;
}

std::vector<std::string> TensorSelector::select(const Trial& trial) const {
  std::set<std::string> out;
  for (const std::string& c : collections_)
    for (const std::string& t : trial.tensorNames(c)) out.insert(t);
  if (!regexes_.empty())
    for (const std::string& t : trial.tensorNames())
      if (matches(t)) out.insert(t);
  return {out.begin(), out.end()};
}

namespace {

bool hasCollection(const Trial& trial, const std::string& name) {
  const auto c = trial.collections();
  return std::find(c.begin(), c.end(), name) != c.end();
}

bool containsLower(const std::string& s, const std::string& needle) {
  std::string l = s;
  for (char& ch : l) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return l.find(needle) != std::string::npos;
}

// The trial's tensors whose names pass `named`, in the trial's order.
template <typename Named>
std::vector<std::string> namedLike(const Trial& trial, Named named) {
  std::vector<std::string> out;
  for (const std::string& t : trial.tensorNames())
    if (named(t)) out.push_back(t);
  return out;
}

// The tensors of `collection` when the trial has it and it is not empty, else namedLike().
template <typename Named>
std::vector<std::string> collectionOr(const Trial& trial, const std::string& collection, Named named) {
  // Filled (here or, for one rank's trial, on another rank): the collection, even when this
  // trial holds none of its tensors, as the offline reader of every rank's files decides.
  if (hasCollection(trial, collection) && trial.collectionHasTensors(collection)) return trial.tensorNames(collection);
  return namedLike(trial, named);
}

}  // namespace

std::vector<std::string> lossTensors(const Trial& trial, const TensorSelector& given, bool useLossesCollection) {
  if (!given.empty()) {
    std::vector<std::string> sel = given.select(trial);
    if (useLossesCollection && hasCollection(trial, "losses")) {
      std::set<std::string> all(sel.begin(), sel.end());
      for (const auto& t : trial.tensorNames("losses")) all.insert(t);
      return {all.begin(), all.end()};
    }
    return sel;
  }
  const auto isLoss = [](const std::string& t) { return containsLower(t, "loss"); };
  return useLossesCollection ? collectionOr(trial, "losses", isLoss) : namedLike(trial, isLoss);
}

std::vector<std::string> gradientTensors(const Trial& trial) {
  return collectionOr(trial, "gradients", [](const std::string& t) { return t.rfind("gradient", 0) == 0; });
}

std::vector<std::string> weightTensors(const Trial& trial) {
  return collectionOr(trial, "weights", [](const std::string& t) {
    return t.rfind("gradient", 0) != 0 && t.find("weight") != std::string::npos;
  });
}

double reduce(const std::vector<double>& data, const std::string& op, bool abs) {
  std::vector<double> v = data;
  if (abs)
    for (double& x : v) x = std::fabs(x);
  if (v.empty()) return std::nan("");
  if (op == "mean") return stats::mean(v);
  if (op == "variance") return stats::pvar(v.data(), v.size());
  if (op == "std") return stats::pstd(v);
  if (op == "min") return *std::min_element(v.begin(), v.end());
  if (op == "max") return *std::max_element(v.begin(), v.end());
  if (op == "sum") return stats::sum(v);
  if (op == "l1") {
    double s = 0;
    for (double x : v) s += std::fabs(x);
    return s;
  }
  if (op == "l2") {
    double s = 0;
    for (double x : v) s += x * x;
    return std::sqrt(s);
  }
  throw std::invalid_argument("unknown reduction \"" + op + "\"");
}

std::optional<double> reductionOf(const Trial& trial, const std::string& name, int64_t step,
                                  const std::string& op, bool abs) {
  if (auto stored = trial.reduction(name, step, op, abs)) return stored;
  auto value = trial.value(name, step);
  if (!value || value->data.empty()) return std::nullopt;
  return reduce(value->data, op, abs);
}

std::optional<double> scalarOf(const Trial& trial, const std::string& name, int64_t step) {
  auto value = trial.value(name, step);
  if (!value || value->data.empty()) {
    if (auto m = trial.reduction(name, step, "mean", false)) return m;
    return std::nullopt;
  }
  return value->data.size() == 1 ? value->data[0] : stats::mean(value->data);
}

std::vector<StepInfo> stepsWithTensor(const Trial& trial, const std::string& name, int64_t upTo) {
  std::vector<StepInfo> out;
  for (const StepInfo& s : trial.steps())
    if (s.step <= upTo && trial.hasTensor(name, s.step)) out.push_back(s);
  return out;
}

}  // namespace strata::rules
