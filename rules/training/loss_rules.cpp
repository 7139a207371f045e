// Loss rules: LossNotDecreasing, Overfit, Overtraining, and StalledTrainingRule.
// The reference implementations were never published; each semantic choice is documented in
// docs/rules.md, and LossNotDecreasing meets the verdicts of smdebug's removed tests.
#include <cmath>
#include <deque>
#include <limits>
#include <map>

#include "rules/builtin.h"
#include "rules/format.h"
#include "rules/training/tensor_rule.h"

namespace strata::rules {
namespace {

std::optional<Mode> parseMode(const std::optional<std::string>& s, const std::string& rule) {
  if (!s) return std::nullopt;
  if (*s == "TRAIN") return Mode::kTrain;
  if (*s == "EVAL") return Mode::kEval;
  if (*s == "PREDICT") return Mode::kPredict;
  if (*s == "GLOBAL") return Mode::kGlobal;
  throw std::invalid_argument(rule + ": parameter \"mode\" must be TRAIN, EVAL, PREDICT or GLOBAL, got \"" + *s + "\"");
}

// The mean of the selected loss tensors at a step (one value per step), or nullopt.
std::optional<double> meanLoss(const Trial& trial, const std::vector<std::string>& tensors, int64_t step) {
  double sum = 0;
  int n = 0;
  for (const std::string& t : tensors) {
    if (!trial.hasTensor(t, step)) continue;
    if (auto v = scalarOf(trial, t, step)) {
      sum += *v;
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

// ---------------------------------------------------------------------------------------------
// LossNotDecreasing. Per loss tensor: the first check is at the first saved step at least num_steps
// after the tensor's first saved step, then at the first saved step at least num_steps after the
// previous check. A check compares the loss with the newest saved loss at least num_steps earlier
// and fires when the loss rose by diff_percent % or more of that baseline (diff_percent 0: it did
// not decrease at all), or when the loss is not finite (NaN or infinite: it certainly did not
// decrease). With increase_threshold_percent set, a check also fires when the loss is more than
// that % above the best loss seen so far. Steps are counted in the selected mode (mode steps for
// TRAIN/EVAL, global steps for GLOBAL).
//
// smoothing (Strata): "none" (smdebug's semantics: single saved losses), "mean" (each saved loss
// replaced by the mean of the newest smoothing_window saved losses) or "ema" (an exponential
// moving average with alpha = 2 / (smoothing_window + 1)). Smoothed values enter the comparison
// once smoothing_window losses were saved, so minibatch noise does not fire on a healthy run.

// The smoothed loss of one tensor, fed one saved loss at a time. Pure.
class LossSmoother {
 public:
  enum class Kind { kNone, kMean, kEma };
  LossSmoother(Kind kind, int64_t window) : kind_(kind), window_(kind == Kind::kNone ? 1 : window) {}
  // Adds a saved loss; returns the smoothed value once the window is full.
  std::optional<double> add(double loss) {
    ++seen_;
    switch (kind_) {
      case Kind::kNone: return loss;
      case Kind::kMean: {
        recent_.push_back(loss);
        if (static_cast<int64_t>(recent_.size()) > window_) recent_.pop_front();
        double sum = 0;
        for (double v : recent_) sum += v;
        if (seen_ < window_) return std::nullopt;
        return sum / static_cast<double>(recent_.size());
      }
      case Kind::kEma: {
        const double alpha = 2.0 / (static_cast<double>(window_) + 1);
        ema_ = seen_ == 1 ? loss : alpha * loss + (1 - alpha) * ema_;
        if (seen_ < window_) return std::nullopt;
        return ema_;
      }
    }
    return loss;
  }

 private:
  Kind kind_;
  int64_t window_;
  int64_t seen_ = 0;
  std::deque<double> recent_;
  double ema_ = 0;
};

LossSmoother::Kind parseSmoothing(const std::string& s) {
  if (s == "none") return LossSmoother::Kind::kNone;
  if (s == "mean") return LossSmoother::Kind::kMean;
  if (s == "ema") return LossSmoother::Kind::kEma;
  throw std::invalid_argument("LossNotDecreasing: parameter \"smoothing\" must be none, mean or ema, got \"" + s + "\"");
}

class LossNotDecreasing final : public TensorRuleBase {
 public:
  explicit LossNotDecreasing(const nlohmann::json& params) : TensorRuleBase("LossNotDecreasing") {
    Params p(builtinDecl(name_), params);
    std::vector<std::string> collections = p.list("collection_names");
    std::vector<std::string> regexes = p.list("tensor_regex");
    selector_ = TensorSelector(collections, regexes);
    useLosses_ = p.boolean("use_losses_collection");
    numSteps_ = p.integer("num_steps");
    if (numSteps_ < 1) throw std::invalid_argument("LossNotDecreasing: \"num_steps\" must be at least 1");
    diffPercent_ = p.number("diff_percent");
    increasePercent_ = p.optionalNumber("increase_threshold_percent");
    mode_ = parseMode(p.optionalString("mode"), name_);
    smoothing_ = parseSmoothing(p.string("smoothing"));
    window_ = p.integer("smoothing_window");
    if (window_ < 1) throw std::invalid_argument("LossNotDecreasing: \"smoothing_window\" must be at least 1");
    finishParams(p);
    std::vector<std::string> shown = {"collection_names", "tensor_regex", "use_losses_collection", "num_steps",
                                      "diff_percent", "increase_threshold_percent", "mode"};
    if (smoothing_ != LossSmoother::Kind::kNone) shown.insert(shown.end(), {"smoothing", "smoothing_window"});
    report_.ruleParameters = p.joined(shown);
    needs_ = "a loss tensor (tensor_regex or collection_names, else the losses collection, else a tensor named "
             "*loss*)";
  }

  std::vector<Finding> invokeAtStep(const Trial& trial, const StepInfo& step) override {
    const Mode mode = effectiveMode(trial);
    if (mode != Mode::kGlobal && step.mode != mode) return {};
    const int64_t key = mode == Mode::kGlobal ? step.step : step.modeStep;
    std::vector<std::string> bad;
    std::string detail;
    nlohmann::json details = nlohmann::json::object();
    bool any = false;
    for (const std::string& t : lossTensors(trial, selector_, useLosses_)) {
      if (!trial.hasTensor(t, step.step)) continue;
      auto value = scalarOf(trial, t, step.step);
      if (!value) continue;
      any = true;
      State& st = state_.try_emplace(t, smoothing_, window_).first->second;
      const std::optional<double> smoothed = st.smoother.add(*value);
      if (!smoothed) continue;  // still filling the smoothing window
      check(t, key, *smoothed, st, &bad, &detail, &details);
    }
    if (any) evaluated();
    if (bad.empty()) return {};  // the message is formatted only for a finding
    return conclude(step, bad,
                    c10::str("loss did not decrease over ", numSteps_, " steps",
                             diffPercent_ > 0 ? " (rose by at least " + num(diffPercent_) + "%)" : "", ": ", detail),
                    details);
  }

 private:
  struct Entry {
    int64_t key;
    double value;
  };
  struct State {
    State(LossSmoother::Kind kind, int64_t window) : smoother(kind, window) {}
    LossSmoother smoother;
    std::deque<Entry> history;
    int64_t nextCheck = 0;
    double best = std::numeric_limits<double>::infinity();
  };

  // One (smoothed) loss of tensor t at `key`: the check when it is due, then the history.
  void check(const std::string& t, int64_t key, double value, State& st, std::vector<std::string>* bad,
             std::string* detail, nlohmann::json* details) {
    if (st.history.empty()) st.nextCheck = key + numSteps_;
    if (key >= st.nextCheck) {
      const Entry* base = nullptr;
      for (const Entry& e : st.history)
        if (e.key <= key - numSteps_) base = &e;
      if (base != nullptr) {
        st.nextCheck = key + numSteps_;
        const double rose = value - base->value;
        const bool notFinite = std::isnan(value) || value == std::numeric_limits<double>::infinity();
        const bool notDecreasing = notFinite || rose >= std::fabs(base->value) * diffPercent_ / 100;
        const bool aboveBest = increasePercent_ && value > st.best + std::fabs(st.best) * *increasePercent_ / 100;
        if (notDecreasing || aboveBest) {
          bad->push_back(t);
          if (detail->empty()) {
            const char* what = smoothing_ == LossSmoother::Kind::kNone ? "" : " (smoothed)";
            *detail = notDecreasing
                          ? c10::str(t, what, " ", num(base->value), " at step ", base->key, " -> ", num(value),
                                     " at step ", key,
                                     diffPercent_ > 0 && !notFinite
                                         ? " (rose by " + fixed(rose / std::fabs(base->value) * 100) + "%)"
                                         : "")
                          : c10::str(t, what, " ", num(value), " is more than ", num(*increasePercent_),
                                     "% above its best ", num(st.best));
            *details = {{"tensor", t}, {"baseline_step", base->key}, {"baseline", base->value}, {"loss", value}};
          }
        }
      }
    }
    st.history.push_back({key, value});
    st.best = std::min(st.best, value);
    while (st.history.size() >= 2 && st.history[1].key <= st.nextCheck - numSteps_) st.history.pop_front();
  }

  // Without a `mode`, EVAL losses when the run has them (as smdebug), else TRAIN. An EVAL
  // step counts only when it holds a loss: an evaluation pass that saved none (an accuracy
  // test, recorded as EVAL steps) must not hide the training losses. Steps are scanned once.
  Mode effectiveMode(const Trial& trial) {
    if (mode_) return *mode_;
    for (const StepInfo& s : trial.stepsAfter(scannedUpTo_)) {
      scannedUpTo_ = s.step;
      if (s.mode != Mode::kEval || evalHasLoss_) continue;
      for (const std::string& t : lossTensors(trial, selector_, useLosses_))
        if (trial.hasTensor(t, s.step)) evalHasLoss_ = true;
    }
    if (evalHasLoss_) return Mode::kEval;
    return trial.hasMode(Mode::kTrain) ? Mode::kTrain : Mode::kGlobal;
  }

  TensorSelector selector_;
  bool useLosses_;
  int64_t numSteps_;
  double diffPercent_;
  std::optional<double> increasePercent_;
  std::optional<Mode> mode_;
  LossSmoother::Kind smoothing_;
  int64_t window_;
  std::map<std::string, State> state_;
  int64_t scannedUpTo_ = std::numeric_limits<int64_t>::min();  // effectiveMode's scan
  bool evalHasLoss_ = false;
};

// ---------------------------------------------------------------------------------------------
// Overfit: at each EVAL step from start_step, (mean validation loss of the current evaluation
// phase - mean training loss of the training phase before it) / |mean training loss|; fires when
// that exceeds ratio_threshold at `patience` consecutive EVAL steps.
class Overfit final : public TensorRuleBase {
 public:
  explicit Overfit(const nlohmann::json& params) : TensorRuleBase("Overfit") {
    needs_ = "validation (EVAL-mode) losses after training losses";
    Params p(builtinDecl(name_), params);
    selector_ = TensorSelector({}, p.list("tensor_regex"));
    startStep_ = p.integer("start_step");
    patience_ = p.integer("patience");
    ratio_ = p.number("ratio_threshold");
    finishParams(p);
    report_.ruleParameters = p.joined({"tensor_regex", "start_step", "patience", "ratio_threshold"});
  }

  std::vector<Finding> invokeAtStep(const Trial& trial, const StepInfo& step) override {
    if (step.step < startStep_) return {};
    auto loss = meanLoss(trial, lossTensors(trial, selector_, true), step.step);
    if (!loss) return {};
    if (step.mode == Mode::kTrain || step.mode == Mode::kGlobal) {
      if (lastMode_ == Mode::kEval) trainSum_ = 0, trainN_ = 0;
      trainSum_ += *loss;
      ++trainN_;
      lastMode_ = Mode::kTrain;
      return {};
    }
    if (step.mode != Mode::kEval) return {};
    if (lastMode_ != Mode::kEval) valSum_ = 0, valN_ = 0;
    lastMode_ = Mode::kEval;
    valSum_ += *loss;
    ++valN_;
    if (trainN_ == 0) return {};
    evaluated();
    const double train = trainSum_ / trainN_, val = valSum_ / valN_;
    const double ratio = (val - train) / std::fabs(train);
    streak_ = ratio > ratio_ ? streak_ + 1 : 0;
    if (streak_ < patience_) return {};
    return conclude(step, {"validation vs training loss"},
                    c10::str("validation loss ", num(val), " is ", fixed(ratio * 100), "% above the training loss ",
                             num(train), " (threshold ", num(ratio_ * 100), "%) for ", streak_, " evaluation step(s)"),
                    {{"train_loss", train}, {"validation_loss", val}, {"ratio", ratio}});
  }

 private:
  TensorSelector selector_;
  int64_t startStep_, patience_;
  double ratio_;
  Mode lastMode_ = Mode::kGlobal;
  double trainSum_ = 0, valSum_ = 0;
  int64_t trainN_ = 0, valN_ = 0, streak_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Overtraining: the training loss (TRAIN or GLOBAL steps) has not improved on its best by more
// than `delta` for patience_train saved steps, or the validation loss (EVAL steps) for
// patience_validation saved steps.
class Overtraining final : public TensorRuleBase {
 public:
  explicit Overtraining(const nlohmann::json& params) : TensorRuleBase("Overtraining") {
    needs_ = "training or validation losses";
    Params p(builtinDecl(name_), params);
    patience_[0] = p.integer("patience_train");
    patience_[1] = p.integer("patience_validation");
    delta_ = p.number("delta");
    finishParams(p);
    report_.ruleParameters = p.joined({"patience_train", "patience_validation", "delta"});
  }

  std::vector<Finding> invokeAtStep(const Trial& trial, const StepInfo& step) override {
    if (step.mode == Mode::kPredict) return {};
    auto loss = meanLoss(trial, lossTensors(trial, TensorSelector(), true), step.step);
    if (!loss) return {};
    evaluated();
    const int which = step.mode == Mode::kEval ? 1 : 0;
    Track& t = track_[which];
    if (!t.seen || *loss < t.best - delta_) {
      t.best = *loss;
      t.stall = 0;
      t.seen = true;
      return {};
    }
    ++t.stall;
    if (t.stall < patience_[which]) return {};
    const char* what = which ? "validation" : "training";
    return conclude(step, {std::string(what) + " loss"},
                    c10::str(what, " loss has not improved on its best ", num(t.best), " by more than ", num(delta_),
                             " for ", t.stall, " saved steps (patience ", patience_[which], ")"),
                    {{"best", t.best}, {"loss", *loss}, {"steps_without_improvement", t.stall}});
  }

 private:
  struct Track {
    bool seen = false;
    double best = 0;
    int64_t stall = 0;
  };
  int64_t patience_[2];
  double delta_;
  Track track_[2];
};

// ---------------------------------------------------------------------------------------------
// StalledTrainingRule: no new tensor data for `threshold` seconds of wall clock. Online, the
// engine's tick compares now with the newest data; offline, gaps between the wall times of
// consecutive steps are checked. stop_training_on_fire adds the StopTraining action (engine).
class StalledTraining final : public TensorRuleBase {
 public:
  explicit StalledTraining(const nlohmann::json& params) : TensorRuleBase("StalledTrainingRule") {
    needs_ = "saved steps";
    Params p(builtinDecl(name_), params);
    threshold_ = p.number("threshold");
    p.boolean("stop_training_on_fire");
    p.optionalString("training_job_name_prefix");  // SageMaker job lookup; not needed here
    finishParams(p);
    report_.ruleParameters = p.joined({"threshold", "stop_training_on_fire", "training_job_name_prefix"});
  }

  std::vector<Finding> invokeAtStep(const Trial& /*trial*/, const StepInfo& step) override {
    evaluated();
    if (std::isnan(step.wallTimeSec)) return {};
    const double previous = lastWall_;
    lastWall_ = std::isnan(previous) ? step.wallTimeSec : std::max(previous, step.wallTimeSec);
    reported_ = false;
    if (std::isnan(previous) || step.wallTimeSec - previous <= threshold_) return {};
    return conclude(step, {"training progress"},
                    c10::str("no tensor was written for ", fixed(step.wallTimeSec - previous, 0),
                             " s before step ", step.step, " (threshold ", num(threshold_), " s)"));
  }

  std::vector<Finding> onTick(const Trial* trial, double nowSec) override {
    if (trial == nullptr || trial->finished()) return {};
    double last = lastWall_;
    if (auto u = trial->lastUpdateSec()) last = std::isnan(last) ? *u : std::max(last, *u);
    if (std::isnan(last) || reported_ || nowSec - last <= threshold_) return {};
    reported_ = true;
    ++report_.ruleTriggered;
    ++report_.violations;
    Finding f;
    f.rule = name_;
    f.subjects = {"training progress"};
    f.message = c10::str("no new tensor for ", fixed(nowSec - last, 0), " s (threshold ", num(threshold_),
                         " s): training looks stalled");
    f.details = {{"idle_s", nowSec - last}};
    return {f};
  }

 private:
  double threshold_;
  double lastWall_ = std::numeric_limits<double>::quiet_NaN();
  bool reported_ = false;
};

}  // namespace

std::unique_ptr<Rule> makeLossNotDecreasing(const nlohmann::json& p, const BuiltinContext&) {
  return std::make_unique<LossNotDecreasing>(p);
}
std::unique_ptr<Rule> makeOverfit(const nlohmann::json& p, const BuiltinContext&) { return std::make_unique<Overfit>(p); }
std::unique_ptr<Rule> makeOvertraining(const nlohmann::json& p, const BuiltinContext&) {
  return std::make_unique<Overtraining>(p);
}
std::unique_ptr<Rule> makeStalledTraining(const nlohmann::json& p, const BuiltinContext&) {
  return std::make_unique<StalledTraining>(p);
}

}  // namespace strata::rules
