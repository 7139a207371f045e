// Classification rules: ClassImbalance and Confusion, over label and prediction tensors.
// Labels and predictions are class indices (rounded to integers); with `argmax`, a prediction
// tensor of shape [batch, classes] is reduced to its argmax per row.
#include <algorithm>
#include <cmath>
#include <map>

#include "rules/builtin.h"
#include "rules/format.h"
#include "rules/training/tensor_rule.h"

namespace strata::rules {
namespace {

std::vector<int64_t> classesOf(const TensorValue& v, bool argmax) {
  std::vector<int64_t> out;
  if (argmax && v.shape.size() == 2 && v.shape[1] > 0) {
    const size_t rows = static_cast<size_t>(v.shape[0]), cols = static_cast<size_t>(v.shape[1]);
    for (size_t r = 0; r < rows; ++r) {
      const double* row = v.data.data() + r * cols;
      out.push_back(static_cast<int64_t>(std::max_element(row, row + cols) - row));
    }
    return out;
  }
  out.reserve(v.data.size());
  for (double x : v.data) out.push_back(static_cast<int64_t>(std::llround(x)));
  return out;
}

std::vector<std::string> matching(const Trial& trial, const std::regex& re) {
  std::vector<std::string> out;
  for (const std::string& t : trial.tensorNames())
    if (std::regex_search(t, re)) out.push_back(t);
  return out;
}

// ---------------------------------------------------------------------------------------------
// ClassImbalance: counts per class accumulate over steps; once at least `samples` labels have
// been seen, fires when the largest class count is more than threshold_imbalance times the
// smallest (classes that occurred), or when some class's fraction of mispredictions exceeds
// threshold_misprediction (when predictions of the same length exist).
class ClassImbalance final : public TensorRuleBase {
 public:
  explicit ClassImbalance(const nlohmann::json& params) : TensorRuleBase("ClassImbalance") {
    needs_ = "label tensors (labels_regex, default .*labels)";
    Params p(builtinDecl(name_), params);
    imbalance_ = p.number("threshold_imbalance");
    misprediction_ = p.number("threshold_misprediction");
    samples_ = p.integer("samples");
    argmax_ = p.boolean("argmax");
    labels_ = compileRegex(name_, "labels_regex", p.string("labels_regex"));
    predictions_ = compileRegex(name_, "predictions_regex", p.string("predictions_regex"));
    finishParams(p);
    report_.ruleParameters = p.joined(
        {"threshold_imbalance", "threshold_misprediction", "samples", "argmax", "labels_regex", "predictions_regex"});
  }

  std::vector<Finding> invokeAtStep(const Trial& trial, const StepInfo& step) override {
    const std::vector<std::string> labelNames = matching(trial, labels_);
    const std::vector<std::string> predNames = matching(trial, predictions_);
    bool any = false;
    for (size_t i = 0; i < labelNames.size(); ++i) {
      auto lv = trial.value(labelNames[i], step.step);
      if (!lv) continue;
      any = true;
      const std::vector<int64_t> labels = classesOf(*lv, false);
      for (int64_t c : labels) ++counts_[c];
      total_ += static_cast<int64_t>(labels.size());
      if (i < predNames.size()) {
        if (auto pv = trial.value(predNames[i], step.step)) {
          const std::vector<int64_t> preds = classesOf(*pv, argmax_);
          if (preds.size() == labels.size())
            for (size_t k = 0; k < labels.size(); ++k) {
              ++predicted_[labels[k]];
              if (preds[k] != labels[k]) ++wrong_[labels[k]];
            }
        }
      }
    }
    if (!any) return {};
    evaluated();
    if (total_ < samples_ || counts_.empty()) return {};
    std::vector<std::string> bad, why;
    int64_t maxCount = 0, minCount = INT64_MAX, maxClass = 0, minClass = 0;
    for (const auto& [c, n] : counts_) {
      if (n > maxCount) maxCount = n, maxClass = c;
      if (n < minCount) minCount = n, minClass = c;
    }
    const double ratio = static_cast<double>(maxCount) / static_cast<double>(minCount);
    if (ratio > imbalance_) {
      bad.push_back("class " + std::to_string(minClass));
      why.push_back(c10::str("class ", maxClass, " has ", maxCount, " samples and class ", minClass, " only ", minCount,
                             " (ratio ", fixed(ratio), ", threshold ", num(imbalance_), ")"));
    }
    for (const auto& [c, n] : predicted_) {
      const double frac = static_cast<double>(wrong_[c]) / static_cast<double>(n);
      if (frac > misprediction_) {
        bad.push_back("class " + std::to_string(c));
        why.push_back(c10::str(fixed(frac * 100, 0), "% of class ", c, " is mispredicted"));
      }
    }
    std::string msg = "class imbalance after " + std::to_string(total_) + " labels: ";
    for (size_t i = 0; i < why.size(); ++i) msg += (i ? "; " : "") + why[i];
    return conclude(step, bad, msg, {{"imbalance_ratio", ratio}, {"labels", total_}});
  }

 private:
  void addDetails(RuleReport& r) const override {
    nlohmann::json c = nlohmann::json::object();
    for (const auto& [k, n] : counts_) c[std::to_string(k)] = n;
    r.details["class_counts"] = c;
  }

  double imbalance_, misprediction_;
  int64_t samples_;
  bool argmax_;
  std::regex labels_, predictions_;
  std::map<int64_t, int64_t> counts_, predicted_, wrong_;
  int64_t total_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Confusion: per step, the confusion matrix c[label][prediction]. For every label row with
// samples: c[i][i] / row total must be >= min_diag and every off-diagonal c[i][j] / row total
// <= max_off_diag.
class Confusion final : public TensorRuleBase {
 public:
  explicit Confusion(const nlohmann::json& params) : TensorRuleBase("Confusion") {
    needs_ = "label and prediction tensors of equal length";
    Params p(builtinDecl(name_), params);
    const auto categories = p.optionalNumber("category_no");
    categories_ = categories ? static_cast<int64_t>(*categories) : 0;
    labels_ = p.string("labels");
    predictions_ = p.string("predictions");
    labelsCollection_ = p.optionalString("labels_collection");
    predictionsCollection_ = p.optionalString("predictions_collection");
    minDiag_ = p.number("min_diag");
    maxOffDiag_ = p.number("max_off_diag");
    finishParams(p);
    report_.ruleParameters = p.joined({"category_no", "labels", "predictions", "labels_collection",
                                       "predictions_collection", "min_diag", "max_off_diag"});
  }

  std::vector<Finding> invokeAtStep(const Trial& trial, const StepInfo& step) override {
    const std::string ln = pick(trial, labelsCollection_, labels_, step.step);
    const std::string pn = pick(trial, predictionsCollection_, predictions_, step.step);
    if (ln.empty() || pn.empty()) return {};
    auto lv = trial.value(ln, step.step);
    auto pv = trial.value(pn, step.step);
    if (!lv || !pv) return {};
    const std::vector<int64_t> labels = classesOf(*lv, false);
    const std::vector<int64_t> preds = classesOf(*pv, pv->shape.size() == 2 && pv->shape[0] == static_cast<int64_t>(labels.size()));
    if (labels.size() != preds.size()) return {};
    evaluated();
    int64_t n = categories_;
    for (size_t i = 0; i < labels.size(); ++i) n = std::max({n, labels[i] + 1, preds[i] + 1});
    std::vector<std::vector<int64_t>> c(static_cast<size_t>(n), std::vector<int64_t>(static_cast<size_t>(n), 0));
    for (size_t i = 0; i < labels.size(); ++i)
      if (labels[i] >= 0 && preds[i] >= 0) ++c[static_cast<size_t>(labels[i])][static_cast<size_t>(preds[i])];
    std::vector<std::string> bad, why;
    for (int64_t i = 0; i < n; ++i) {
      const auto& row = c[static_cast<size_t>(i)];
      int64_t total = 0;
      for (int64_t x : row) total += x;
      if (total == 0) continue;
      const double diag = static_cast<double>(row[static_cast<size_t>(i)]) / total;
      bool rowBad = false;
      if (diag < minDiag_) {
        why.push_back(c10::str("class ", i, " is predicted correctly ", fixed(diag * 100, 0), "% of the time"));
        rowBad = true;
      }
      for (int64_t j = 0; j < n; ++j) {
        if (j == i) continue;
        const double off = static_cast<double>(row[static_cast<size_t>(j)]) / total;
        if (off > maxOffDiag_) {
          why.push_back(c10::str("class ", i, " is predicted as ", j, " ", fixed(off * 100, 0), "% of the time"));
          rowBad = true;
        }
      }
      if (rowBad) bad.push_back("class " + std::to_string(i));
    }
    std::string msg = "confusion matrix outside bounds (diagonal >= " + num(minDiag_) + ", off-diagonal <= " +
                      num(maxOffDiag_) + "): ";
    for (size_t i = 0; i < why.size() && i < 6; ++i) msg += (i ? "; " : "") + why[i];
    return conclude(step, bad, msg, {{"matrix", c}});
  }

 private:
  // The tensor: first of the collection, else the exact name, else the first name matching it.
  static std::string pick(const Trial& trial, const std::optional<std::string>& collection, const std::string& name,
                          int64_t step) {
    if (collection) {
      for (const std::string& t : trial.tensorNames(*collection))
        if (trial.hasTensor(t, step)) return t;
      return "";
    }
    if (trial.hasTensor(name, step)) return name;
    try {
      const std::regex re(name);
      for (const std::string& t : trial.tensorNames())
        if (std::regex_search(t, re) && trial.hasTensor(t, step)) return t;
    } catch (const std::regex_error&) {
    }
    return "";
  }

  int64_t categories_;
  std::string labels_, predictions_;
  std::optional<std::string> labelsCollection_, predictionsCollection_;
  double minDiag_, maxOffDiag_;
};

}  // namespace

std::unique_ptr<Rule> makeClassImbalance(const nlohmann::json& p, const BuiltinContext&) {
  return std::make_unique<ClassImbalance>(p);
}
std::unique_ptr<Rule> makeConfusion(const nlohmann::json& p, const BuiltinContext&) {
  return std::make_unique<Confusion>(p);
}

}  // namespace strata::rules
