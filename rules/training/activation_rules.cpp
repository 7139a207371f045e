// Activation rules: DeadRelu, SaturatedActivation and PoorWeightInitialization.
//
// Unit activity: for an activation tensor of shape [batch, ...], a unit is one position of the
// trailing dimensions and its activity is the % of the batch in which it is active (ReLU output
// > 0; tanh/sigmoid input strictly inside the non-saturated range). A tensor of rank <= 1 is one
// sample (each element a unit). Evaluated per step on that step's batch.
#include <algorithm>
#include <cmath>
#include <limits>

#include "rules/builtin.h"
#include "rules/format.h"
#include "rules/stats.h"
#include "rules/training/tensor_rule.h"

namespace strata::rules {
namespace {

// % of units whose activity is below `inactivityPct`.
template <typename Active>
double inactiveUnitPercent(const TensorValue& v, double inactivityPct, Active active) {
  const size_t n = v.data.size();
  if (n == 0) return 0;
  const size_t batch = v.shape.size() >= 2 && v.shape[0] > 0 ? static_cast<size_t>(v.shape[0]) : 1;
  const size_t units = n / batch;
  if (units == 0) return 0;
  size_t inactive = 0;
  for (size_t u = 0; u < units; ++u) {
    size_t on = 0;
    for (size_t b = 0; b < batch; ++b) on += active(v.data[b * units + u]);
    if (static_cast<double>(on) / static_cast<double>(batch) * 100 < inactivityPct) ++inactive;
  }
  return static_cast<double>(inactive) / static_cast<double>(units) * 100;
}

// The layers (selected tensors of this step) with more than `layerPct` % of inactive units,
// each also shown with its %; `any` says whether any layer had values to judge.
struct LayerScan {
  std::vector<std::string> bad, shown;
  bool any = false;
};

// activeFor(tensor name) gives the per-value "is this unit active" test for that layer.
template <typename ActiveFor>
LayerScan layersAbove(const Trial& trial, const StepInfo& step, const TensorSelector& selector,
                      double inactivityPct, double layerPct, ActiveFor activeFor) {
  LayerScan scan;
  for (const std::string& t : selector.select(trial)) {
    auto v = trial.value(t, step.step);
    if (!v || v->data.empty()) continue;
    scan.any = true;
    const double inactive = inactiveUnitPercent(*v, inactivityPct, activeFor(t));
    if (inactive > layerPct) {
      scan.bad.push_back(t);
      scan.shown.push_back(t + " " + fixed(inactive) + "%");
    }
  }
  return scan;
}

// ---------------------------------------------------------------------------------------------
class DeadRelu final : public TensorRuleBase {
 public:
  explicit DeadRelu(const nlohmann::json& params) : TensorRuleBase("DeadRelu") {
    needs_ = "ReLU outputs (tensor_regex, default .*relu_output: a collection saving layer outputs)";
    Params p(builtinDecl(name_), params);
    std::vector<std::string> regexes = p.list("tensor_regex");
    if (regexes.empty()) regexes = {".*relu_output"};
    selector_ = TensorSelector({}, regexes);
    inactivity_ = p.number("threshold_inactivity");
    layer_ = p.number("threshold_layer");
    finishParams(p);
    report_.ruleParameters = p.joined({"tensor_regex", "threshold_inactivity", "threshold_layer"});
  }
  std::vector<Finding> invokeAtStep(const Trial& trial, const StepInfo& step) override {
    const LayerScan scan = layersAbove(trial, step, selector_, inactivity_, layer_,
                                       [](const std::string&) { return [](double x) { return x > 0; }; });
    if (scan.any) evaluated();
    return conclude(step, scan.bad,
                    c10::str(scan.bad.size(), " ReLU layer(s) have more than ", num(layer_),
                             "% of units active in less than ", num(inactivity_), "% of the batch: ",
                             listOf(scan.shown)));
  }

 private:
  TensorSelector selector_;
  double inactivity_, layer_;
};

// ---------------------------------------------------------------------------------------------
class SaturatedActivation final : public TensorRuleBase {
 public:
  explicit SaturatedActivation(const nlohmann::json& params) : TensorRuleBase("SaturatedActivation") {
    needs_ = "tanh/sigmoid inputs (tensor_regex, default .*tanh_input|.*sigmoid_input)";
    Params p(builtinDecl(name_), params);
    std::vector<std::string> collections = p.list("collection_names");
    std::vector<std::string> regexes = p.list("tensor_regex");
    if (regexes.empty() && collections.empty()) regexes = {".*tanh_input|.*sigmoid_input"};
    selector_ = TensorSelector(collections, regexes);
    tanhMin_ = p.number("threshold_tanh_min");
    tanhMax_ = p.number("threshold_tanh_max");
    sigmoidMin_ = p.number("threshold_sigmoid_min");
    sigmoidMax_ = p.number("threshold_sigmoid_max");
    inactivity_ = p.number("threshold_inactivity");
    layer_ = p.number("threshold_layer");
    finishParams(p);
    report_.ruleParameters =
        p.joined({"collection_names", "tensor_regex", "threshold_tanh_min", "threshold_tanh_max", "threshold_sigmoid_min",
                  "threshold_sigmoid_max", "threshold_inactivity", "threshold_layer"});
  }
  std::vector<Finding> invokeAtStep(const Trial& trial, const StepInfo& step) override {
    // A unit is active while its input is inside the non-saturated range of its function.
    const LayerScan scan = layersAbove(trial, step, selector_, inactivity_, layer_, [this](const std::string& t) {
      const bool sigmoid = t.find("sigmoid") != std::string::npos;
      const double lo = sigmoid ? sigmoidMin_ : tanhMin_, hi = sigmoid ? sigmoidMax_ : tanhMax_;
      return [lo, hi](double x) { return x > lo && x < hi; };
    });
    if (scan.any) evaluated();
    return conclude(step, scan.bad,
                    c10::str(scan.bad.size(), " activation layer(s) have more than ", num(layer_),
                             "% of units saturated: ", listOf(scan.shown)));
  }

 private:
  TensorSelector selector_;
  double tanhMin_, tanhMax_, sigmoidMin_, sigmoidMax_, inactivity_, layer_;
};

// ---------------------------------------------------------------------------------------------
// PoorWeightInitialization, over the first `steps` saved steps:
//   - the ratio of the largest to the smallest variance of the activation inputs across layers
//     exceeds `threshold`;
//   - p95 - p5 of the gradient values (pooled over all gradient tensors of the step) is below
//     `distribution_range`;
//   - the loss has not reached a new minimum for `patience` consecutive saved steps.
class PoorWeightInitialization final : public TensorRuleBase {
 public:
  explicit PoorWeightInitialization(const nlohmann::json& params) : TensorRuleBase("PoorWeightInitialization") {
    needs_ = "saved steps with activation inputs, gradients or losses";
    Params p(builtinDecl(name_), params);
    selector_ = TensorSelector({}, {p.string("activation_inputs_regex")});
    threshold_ = p.number("threshold");
    range_ = p.number("distribution_range");
    patience_ = p.integer("patience");
    steps_ = p.integer("steps");
    finishParams(p);
    report_.ruleParameters =
        p.joined({"activation_inputs_regex", "threshold", "distribution_range", "patience", "steps"});
  }

  std::vector<Finding> invokeAtStep(const Trial& trial, const StepInfo& step) override {
    if (seenSteps_ >= steps_) return {};
    ++seenSteps_;
    evaluated();
    std::vector<std::string> bad;
    std::vector<std::string> why;
    nlohmann::json details = nlohmann::json::object();
    // Activation-input variances across layers.
    double vmin = std::numeric_limits<double>::infinity(), vmax = 0;
    std::string argmin, argmax;
    int layers = 0;
    for (const std::string& t : selector_.select(trial)) {
      if (!trial.hasTensor(t, step.step)) continue;
      auto var = reductionOf(trial, t, step.step, "variance", false);
      if (!var) continue;
      ++layers;
      if (*var < vmin) vmin = *var, argmin = t;
      if (*var > vmax) vmax = *var, argmax = t;
    }
    if (layers >= 2 && (vmin == 0 ? vmax > 0 : vmax / vmin > threshold_)) {
      bad.push_back(argmax);
      why.push_back(c10::str("activation-input variance ranges from ", num(vmin), " (", argmin, ") to ", num(vmax),
                             " (", argmax, "), ratio above ", num(threshold_)));
      details["variance_ratio"] = vmin > 0 ? vmax / vmin : std::numeric_limits<double>::infinity();
    }
    // Gradient spread.
    std::vector<double> grads;
    for (const std::string& t : gradientTensors(trial)) {
      auto v = trial.value(t, step.step);
      if (v) grads.insert(grads.end(), v->data.begin(), v->data.end());
    }
    if (!grads.empty()) {
      std::sort(grads.begin(), grads.end());
      const double spread = stats::quantileSorted(grads, 0.95) - stats::quantileSorted(grads, 0.05);
      details["gradient_p95_minus_p5"] = spread;
      if (spread < range_) {
        bad.push_back("gradients");
        why.push_back(c10::str("gradients p95 - p5 is ", num(spread), ", below ", num(range_)));
      }
    }
    // Loss convergence.
    if (auto loss = [&]() -> std::optional<double> {
          double s = 0;
          int n = 0;
          for (const std::string& t : lossTensors(trial, TensorSelector(), true))
            if (auto v = scalarOf(trial, t, step.step)) s += *v, ++n;
          return n ? std::optional<double>(s / n) : std::nullopt;
        }()) {
      if (*loss < bestLoss_) {
        bestLoss_ = *loss;
        sinceBest_ = 0;
      } else if (++sinceBest_ >= patience_) {
        bad.push_back("loss");
        why.push_back(c10::str("the loss has not decreased for ", sinceBest_, " saved steps"));
      }
    }
    std::string msg = "poor weight initialisation: ";
    for (size_t i = 0; i < why.size(); ++i) msg += (i ? "; " : "") + why[i];
    return conclude(step, bad, msg, details);
  }

 private:
  TensorSelector selector_;
  double threshold_, range_;
  int64_t patience_, steps_;
  int64_t seenSteps_ = 0, sinceBest_ = 0;
  double bestLoss_ = std::numeric_limits<double>::infinity();
};

}  // namespace

std::unique_ptr<Rule> makeDeadRelu(const nlohmann::json& p, const BuiltinContext&) { return std::make_unique<DeadRelu>(p); }
std::unique_ptr<Rule> makeSaturatedActivation(const nlohmann::json& p, const BuiltinContext&) {
  return std::make_unique<SaturatedActivation>(p);
}
std::unique_ptr<Rule> makePoorWeightInitialization(const nlohmann::json& p, const BuiltinContext&) {
  return std::make_unique<PoorWeightInitialization>(p);
}

}  // namespace strata::rules
