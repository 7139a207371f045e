// Tensor-value rules: VanishingGradient, ExplodingTensor, AllZero, TensorVariance,
// UnchangedTensor and WeightUpdateRatio. Each checks the tensors of one step and returns at
// most one finding per step listing every violating tensor (docs/rules.md).
#include <algorithm>
#include <cmath>

#include "rules/builtin.h"
#include "rules/format.h"
#include "rules/training/tensor_rule.h"

namespace strata::rules {
namespace {

TensorSelector selectorFrom(Params& p) {
  std::vector<std::string> collections = p.list("collection_names");
  std::vector<std::string> regexes = p.list("tensor_regex");
  for (const auto& r : regexes) compileRegex(p.rule(), "tensor_regex", r);
  return TensorSelector(collections, regexes);
}

// ---------------------------------------------------------------------------------------------
// VanishingGradient: the mean of the absolute values of a gradient is below `threshold`.
class VanishingGradient final : public TensorRuleBase {
 public:
  explicit VanishingGradient(const nlohmann::json& params) : TensorRuleBase("VanishingGradient") {
    needs_ = "gradients (the gradients collection, or tensors named gradient*)";
    Params p(builtinDecl(name_), params);
    threshold_ = p.number("threshold");
    finishParams(p);
    report_.ruleParameters = p.joined({"threshold"});
  }
  std::vector<Finding> invokeAtStep(const Trial& trial, const StepInfo& step) override {
    std::vector<std::string> bad;
    double smallest = INFINITY;
    bool any = false;
    for (const std::string& t : gradientTensors(trial)) {
      if (!trial.hasTensor(t, step.step)) continue;
      auto m = reductionOf(trial, t, step.step, "mean", true);
      if (!m) continue;
      any = true;
      smallest = std::min(smallest, *m);
      if (*m < threshold_) bad.push_back(t);
    }
    if (any) evaluated();
    return conclude(step, bad,
                    c10::str(bad.size(), " gradient(s) have a mean absolute value below ", num(threshold_),
                             " (smallest ", smallest, "): ", listOf(bad)),
                    {{"smallest_abs_mean", smallest}});
  }

 private:
  double threshold_;
};

// ---------------------------------------------------------------------------------------------
// ExplodingTensor: a NaN (or, unless only_nan, an infinity) in any selected tensor (all
// tensors by default). Tensors saved only as reductions are judged by their reductions.
class ExplodingTensor final : public TensorRuleBase {
 public:
  explicit ExplodingTensor(const nlohmann::json& params) : TensorRuleBase("ExplodingTensor") {
    needs_ = "the selected tensors (collection_names / tensor_regex, default every tensor)";
    Params p(builtinDecl(name_), params);
    selector_ = selectorFrom(p);
    onlyNan_ = p.boolean("only_nan");
    finishParams(p);
    report_.ruleParameters = p.joined({"collection_names", "tensor_regex", "only_nan"});
  }
  std::vector<Finding> invokeAtStep(const Trial& trial, const StepInfo& step) override {
    const std::vector<std::string> names = selector_.empty() ? trial.tensorNames() : selector_.select(trial);
    std::vector<std::string> bad;
    int64_t nans = 0, infs = 0;
    bool any = false;
    for (const std::string& t : names) {
      if (!trial.hasTensor(t, step.step)) continue;
      any = true;
      bool hit = false;
      if (auto v = trial.value(t, step.step)) {
        for (double x : v->data) {
          if (std::isnan(x)) {
            ++nans;
            hit = true;
          } else if (!onlyNan_ && std::isinf(x)) {
            ++infs;
            hit = true;
          }
        }
      } else {
        for (const char* op : {"mean", "max", "min", "l2", "l1", "sum", "variance", "std"}) {
          for (bool abs : {false, true}) {
            auto r = trial.reduction(t, step.step, op, abs);
            if (r && (std::isnan(*r) || (!onlyNan_ && std::isinf(*r)))) hit = true;
          }
        }
      }
      if (hit) bad.push_back(t);
    }
    if (any) evaluated();
    return conclude(step, bad,
                    c10::str(bad.size(), " tensor(s) contain ", onlyNan_ ? "NaN" : "NaN or infinite",
                             " values (", nans, " NaN, ", infs, " inf): ", listOf(bad)),
                    {{"nan", nans}, {"inf", infs}});
  }

 private:
  TensorSelector selector_;
  bool onlyNan_;
};

// ---------------------------------------------------------------------------------------------
// AllZero: at least `threshold` % of a tensor's values are exactly zero.
class AllZero final : public TensorRuleBase {
 public:
  explicit AllZero(const nlohmann::json& params) : TensorRuleBase("AllZero") {
    needs_ = "the selected tensors (collection_names / tensor_regex)";
    Params p(builtinDecl(name_), params);
    selector_ = selectorFrom(p);
    if (selector_.empty())
      throw std::invalid_argument("AllZero: needs \"collection_names\" or \"tensor_regex\"");
    threshold_ = p.number("threshold");
    finishParams(p);
    report_.ruleParameters = p.joined({"collection_names", "tensor_regex", "threshold"});
  }
  std::vector<Finding> invokeAtStep(const Trial& trial, const StepInfo& step) override {
    std::vector<std::string> bad;
    bool any = false;
    for (const std::string& t : selector_.select(trial)) {
      auto v = trial.value(t, step.step);
      if (!v || v->data.empty()) continue;
      any = true;
      const auto zeros = std::count(v->data.begin(), v->data.end(), 0.0);
      if (static_cast<double>(zeros) / static_cast<double>(v->data.size()) * 100 >= threshold_) bad.push_back(t);
    }
    if (any) evaluated();
    return conclude(step, bad,
                    c10::str(bad.size(), " tensor(s) have at least ", num(threshold_), "% zeros: ", listOf(bad)));
  }

 private:
  TensorSelector selector_;
  double threshold_;
};

// ---------------------------------------------------------------------------------------------
// TensorVariance: the variance (ddof=0) of a tensor is above max_threshold or below min_threshold.
class TensorVariance final : public TensorRuleBase {
 public:
  explicit TensorVariance(const nlohmann::json& params) : TensorRuleBase("TensorVariance") {
    needs_ = "the selected tensors (collection_names / tensor_regex, default every tensor)";
    Params p(builtinDecl(name_), params);
    selector_ = selectorFrom(p);
    max_ = p.optionalNumber("max_threshold");
    min_ = p.optionalNumber("min_threshold");
    finishParams(p);
    report_.ruleParameters = p.joined({"collection_names", "tensor_regex", "max_threshold", "min_threshold"});
  }
  std::vector<Finding> invokeAtStep(const Trial& trial, const StepInfo& step) override {
    const std::vector<std::string> names = selector_.empty() ? trial.tensorNames() : selector_.select(trial);
    std::vector<std::string> bad;
    bool any = false;
    for (const std::string& t : names) {
      if (!trial.hasTensor(t, step.step)) continue;
      auto var = reductionOf(trial, t, step.step, "variance", false);
      if (!var) continue;
      any = true;
      if ((max_ && *var > *max_) || (min_ && *var < *min_)) bad.push_back(t + " (" + num(*var) + ")");
    }
    if (any) evaluated();
    std::vector<std::string> names2;
    for (const auto& b : bad) names2.push_back(b.substr(0, b.rfind(" (")));
    auto out = conclude(step, names2,
                        c10::str(bad.size(), " tensor(s) have a variance outside [",
                                 min_ ? num(*min_) : "-", ", ", max_ ? num(*max_) : "-", "]: ", listOf(bad)));
    return out;
  }

 private:
  TensorSelector selector_;
  std::optional<double> max_, min_;
};

// numpy.allclose(a, b, rtol, atol, equal_nan): |a - b| <= atol + rtol * |b| elementwise.
bool allClose(const std::vector<double>& a, const std::vector<double>& b, double rtol, double atol, bool equalNan) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i];
    if (std::isnan(x) || std::isnan(y)) {
      if (equalNan && std::isnan(x) && std::isnan(y)) continue;
      return false;
    }
    if (std::isinf(x) || std::isinf(y)) {
      if (x == y) continue;
      return false;
    }
    if (!(std::fabs(x - y) <= atol + rtol * std::fabs(y))) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// UnchangedTensor: a tensor is numpy.allclose to itself over the last `num_steps` steps that
// carry it (they need not be consecutive).
class UnchangedTensor final : public TensorRuleBase {
 public:
  explicit UnchangedTensor(const nlohmann::json& params) : TensorRuleBase("UnchangedTensor") {
    needs_ = "raw values of the selected tensors";
    Params p(builtinDecl(name_), params);
    selector_ = selectorFrom(p);
    numSteps_ = p.integer("num_steps");
    if (numSteps_ < 2) throw std::invalid_argument("UnchangedTensor: \"num_steps\" must be at least 2");
    rtol_ = p.number("rtol");
    atol_ = p.number("atol");
    equalNan_ = p.boolean("equal_nan");
    finishParams(p);
    report_.ruleParameters =
        p.joined({"collection_names", "tensor_regex", "num_steps", "rtol", "atol", "equal_nan"});
  }
  std::vector<Finding> invokeAtStep(const Trial& trial, const StepInfo& step) override {
    const std::vector<std::string> names = selector_.empty() ? trial.tensorNames() : selector_.select(trial);
    std::vector<std::string> bad;
    bool any = false;
    for (const std::string& t : names) {
      if (!trial.hasTensor(t, step.step)) continue;
      auto current = trial.value(t, step.step);
      if (!current) continue;
      any = true;
      const std::vector<StepInfo> history = stepsWithTensor(trial, t, step.step);
      if (static_cast<int64_t>(history.size()) < numSteps_) continue;
      bool unchanged = true;
      for (size_t i = history.size() - static_cast<size_t>(numSteps_); i + 1 < history.size() && unchanged; ++i) {
        auto old = trial.value(t, history[i].step);
        unchanged = old && allClose(current->data, old->data, rtol_, atol_, equalNan_);
      }
      if (unchanged) bad.push_back(t);
    }
    if (any) evaluated();
    return conclude(step, bad,
                    c10::str(bad.size(), " tensor(s) did not change over their last ", numSteps_,
                             " saved steps: ", listOf(bad)));
  }

 private:
  TensorSelector selector_;
  int64_t numSteps_;
  double rtol_, atol_;
  bool equalNan_;
};

// ---------------------------------------------------------------------------------------------
// WeightUpdateRatio: ||w_s - w_p|| / (||w_p|| + epsilon) of each weight against its previous
// saved step p (or the newest saved step <= s - num_steps) is above large_threshold or below
// small_threshold. TRAIN steps when the trial has any, else all steps.
class WeightUpdateRatio final : public TensorRuleBase {
 public:
  explicit WeightUpdateRatio(const nlohmann::json& params) : TensorRuleBase("WeightUpdateRatio") {
    needs_ = "raw weights (the weights collection) at two saved steps";
    Params p(builtinDecl(name_), params);
    if (auto n = p.optionalNumber("num_steps")) numSteps_ = static_cast<int64_t>(*n);
    large_ = p.number("large_threshold");
    small_ = p.number("small_threshold");
    epsilon_ = p.number("epsilon");
    finishParams(p);
    report_.ruleParameters = p.joined({"num_steps", "large_threshold", "small_threshold", "epsilon"});
  }
  std::vector<Finding> invokeAtStep(const Trial& trial, const StepInfo& step) override {
    const bool anyTrain = trial.hasMode(Mode::kTrain);
    if (anyTrain && step.mode != Mode::kTrain) return {};
    std::vector<std::string> bad;
    bool any = false;
    for (const std::string& t : weightTensors(trial)) {
      if (!trial.hasTensor(t, step.step)) continue;
      auto cur = trial.value(t, step.step);
      if (!cur) continue;
      const std::vector<StepInfo> history = stepsWithTensor(trial, t, step.step - 1);
      const StepInfo* prev = nullptr;
      for (auto it = history.rbegin(); it != history.rend(); ++it) {
        if (anyTrain && it->mode != Mode::kTrain) continue;
        if (numSteps_ && it->step > step.step - *numSteps_) continue;
        prev = &*it;
        break;
      }
      if (prev == nullptr) continue;
      auto old = trial.value(t, prev->step);
      if (!old || old->data.size() != cur->data.size()) continue;
      any = true;
      double diff = 0, norm = 0;
      for (size_t i = 0; i < cur->data.size(); ++i) {
        const double d = cur->data[i] - old->data[i];
        diff += d * d;
        norm += old->data[i] * old->data[i];
      }
      const double ratio = std::sqrt(diff) / (std::sqrt(norm) + epsilon_);
      if (ratio > large_ || ratio < small_) bad.push_back(t + " (" + num(ratio) + ")");
    }
    if (any) evaluated();
    std::vector<std::string> names;
    for (const auto& b : bad) names.push_back(b.substr(0, b.rfind(" (")));
    return conclude(step, names,
                    c10::str(bad.size(), " weight(s) have an update/weight ratio outside [", num(small_), ", ",
                             num(large_), "]: ", listOf(bad)));
  }

 private:
  std::optional<int64_t> numSteps_;
  double large_, small_, epsilon_;
};

}  // namespace

std::unique_ptr<Rule> makeVanishingGradient(const nlohmann::json& p, const BuiltinContext&) {
  return std::make_unique<VanishingGradient>(p);
}
std::unique_ptr<Rule> makeExplodingTensor(const nlohmann::json& p, const BuiltinContext&) {
  return std::make_unique<ExplodingTensor>(p);
}
std::unique_ptr<Rule> makeAllZero(const nlohmann::json& p, const BuiltinContext&) { return std::make_unique<AllZero>(p); }
std::unique_ptr<Rule> makeTensorVariance(const nlohmann::json& p, const BuiltinContext&) {
  return std::make_unique<TensorVariance>(p);
}
std::unique_ptr<Rule> makeUnchangedTensor(const nlohmann::json& p, const BuiltinContext&) {
  return std::make_unique<UnchangedTensor>(p);
}
std::unique_ptr<Rule> makeWeightUpdateRatio(const nlohmann::json& p, const BuiltinContext&) {
  return std::make_unique<WeightUpdateRatio>(p);
}

}  // namespace strata::rules
