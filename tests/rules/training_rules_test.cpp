// Tensor rules: the golden verdicts of smdebug's removed tests (specs/smdebug.md §3.2) and
// threshold edges of every rule.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "rules_test_util.h"

namespace strata::rules::testing {
namespace {

using json = nlohmann::json;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// test_loss_not_decreasing.py: two scalar tensors loss_0/loss_1 saved every 4 steps.
MemoryTrial lossTrial(const std::vector<double>& values) {
  MemoryTrial t;
  int64_t step = 0;
  for (double v : values) {
    t.addScalar(step, "loss_0", v);
    t.addScalar(step, "loss_1", v);
    step += 4;
  }
  t.setCollection("default", {"loss_0", "loss_1"});
  return t;
}

TEST(LossNotDecreasing, GoldenDefaultFiresAtStep12) {
  const MemoryTrial t = lossTrial({0.3, 0.33, 0.31, 0.30, 0.28});
  for (const json& params : {json{{"tensor_regex", "loss, losses"}}, json{{"collection_names", json::array({"default"})}},
                             json::object()}) {
    auto r = runTensorRule("LossNotDecreasing", params, t);
    EXPECT_EQ(stepsOf(r.findings), std::vector<int64_t>{12}) << params.dump();
  }
}

TEST(LossNotDecreasing, GoldenDiffPercentFiresAtStep24) {
  auto r = runTensorRule("LossNotDecreasing", {{"diff_percent", 20}}, lossTrial({0.3, 0.33, 0.31, 0.30, 0.28, 0.2, 0.42}));
  EXPECT_EQ(stepsOf(r.findings), std::vector<int64_t>{24});
  EXPECT_EQ(r.report["RuleParameters"],
            "collection_names:None\ntensor_regex:None\nuse_losses_collection:True\nnum_steps:10\ndiff_percent:20\n"
            "increase_threshold_percent:None\nmode:None");
}

TEST(LossNotDecreasing, DecreasingLossNeverFiresAndRiseBelowDiffPercentToo) {
  EXPECT_TRUE(runTensorRule("LossNotDecreasing", json::object(), lossTrial({1, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4})).findings.empty());
  // Baseline 1.0 at step 0, checked at 12: +24% with diff_percent 25 does not fire, +25% does.
  EXPECT_TRUE(runTensorRule("LossNotDecreasing", {{"diff_percent", 25}}, lossTrial({1, 1, 1, 1.24})).findings.empty());
  EXPECT_EQ(stepsOf(runTensorRule("LossNotDecreasing", {{"diff_percent", 25}}, lossTrial({1, 1, 1, 1.25})).findings),
            std::vector<int64_t>{12});
}

TEST(LossNotDecreasing, NumStepsAndModes) {
  MemoryTrial t;
  // TRAIN every step (mode steps 0..), EVAL at global steps 100+ (mode steps 0..).
  for (int s = 0; s < 30; ++s) t.addScalar(s, "CrossEntropyLoss_output_0", 1.0 - 0.01 * s, Mode::kTrain, s);
  auto train = runTensorRule("LossNotDecreasing", {{"mode", "TRAIN"}, {"num_steps", 5}}, t);
  EXPECT_TRUE(train.findings.empty());
  for (int s = 0; s < 12; ++s) t.addScalar(100 + s, "CrossEntropyLoss_output_0", 2.0, Mode::kEval, s);
  // EVAL losses flat: first EVAL check at mode step 5 (global 105).
  auto eval = runTensorRule("LossNotDecreasing", {{"mode", "EVAL"}, {"num_steps", 5}}, t);
  ASSERT_FALSE(eval.findings.empty());
  EXPECT_EQ(eval.findings.front().step, 105);
  // No mode: EVAL is preferred when present (smdebug's old default).
  EXPECT_EQ(runTensorRule("LossNotDecreasing", {{"num_steps", 5}}, t).findings.front().step, 105);
}

TEST(LossNotDecreasing, IncreaseThresholdAgainstTheBest) {
  // Against 10 steps earlier the loss rose 40% at most (below diff_percent 50), but it is 40%
  // above its best (0.5).
  MemoryTrial t;
  const std::vector<double> v = {1.0, 0.5, 0.7, 0.69, 0.68};
  for (size_t i = 0; i < v.size(); ++i) t.addScalar(int64_t(i) * 10, "loss", v[i]);
  EXPECT_TRUE(runTensorRule("LossNotDecreasing", {{"diff_percent", 50}}, t).findings.empty());
  EXPECT_FALSE(runTensorRule("LossNotDecreasing", {{"diff_percent", 50}, {"increase_threshold_percent", 25}}, t).findings.empty());
}

// test_invoker.py: NaN at steps 0 and 2.
TEST(ExplodingTensor, GoldenNaNSteps) {
  MemoryTrial t;
  for (int i = 0; i < 3; ++i) {
    t.add(0, "foo_" + std::to_string(i), {{1}, {kNaN}});
    t.add(1, "foo_" + std::to_string(i), {{1}, {0.5}});
    t.add(2, "foo_" + std::to_string(i), {{1}, {kNaN}});
  }
  auto r = runTensorRule("ExplodingTensor", json::object(), t);
  EXPECT_EQ(stepsOf(r.findings), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(r.findings[0].subjects.size(), 3u);
}

TEST(ExplodingTensor, InfinityUnlessOnlyNan) {
  MemoryTrial t;
  t.add(0, "gradient/w", {{2}, {1, std::numeric_limits<double>::infinity()}});
  t.setCollection("gradients", {"gradient/w"});
  EXPECT_EQ(runTensorRule("ExplodingTensor", {{"collection_names", "gradients"}}, t).findings.size(), 1u);
  EXPECT_TRUE(runTensorRule("ExplodingTensor", {{"only_nan", true}}, t).findings.empty());
  MemoryTrial reductionsOnly;
  reductionsOnly.addReduction(3, "w", "l2", false, kNaN);
  EXPECT_EQ(stepsOf(runTensorRule("ExplodingTensor", json::object(), reductionsOnly).findings), std::vector<int64_t>{3});
}

// test_unchanged.py: identical tensors at steps 0, 1, 2; other names at step 5.
TEST(UnchangedTensor, GoldenFiresAtStep2Only) {
  MemoryTrial t;
  const TensorValue ones{{10, 3, 2}, std::vector<double>(60, 1.0)};
  for (int64_t s : {0, 1, 2})
    for (int i = 0; i < 3; ++i) t.add(s, "foo_" + std::to_string(i), ones);
  for (int i = 0; i < 3; ++i) t.add(5, "boo_" + std::to_string(i), ones);
  auto r = runTensorRule("UnchangedTensor", {{"tensor_regex", ".*"}}, t);
  EXPECT_EQ(stepsOf(r.findings), std::vector<int64_t>{2});
}

TEST(UnchangedTensor, ToleranceEdges) {
  MemoryTrial t;
  t.add(0, "w", {{1}, {1.0}});
  t.add(1, "w", {{1}, {1.0 + 1e-6}});  // within rtol 1e-5
  t.add(2, "w", {{1}, {1.0}});
  EXPECT_EQ(stepsOf(runTensorRule("UnchangedTensor", json::object(), t).findings), std::vector<int64_t>{2});
  MemoryTrial moving;
  moving.add(0, "w", {{1}, {1.0}});
  moving.add(1, "w", {{1}, {1.0 + 1e-4}});
  moving.add(2, "w", {{1}, {1.0}});
  EXPECT_TRUE(runTensorRule("UnchangedTensor", json::object(), moving).findings.empty());
  EXPECT_FALSE(runTensorRule("UnchangedTensor", {{"rtol", 1e-3}}, moving).findings.empty());
}

// test_class_imbalance.py: 990 zeros and 10 ones at step 3.
TEST(ClassImbalance, GoldenFiresAtStep3) {
  MemoryTrial t;
  std::vector<double> labels(1000, 0.0);
  for (int i = 990; i < 1000; ++i) labels[i] = 1;
  t.add(3, "labels_0", {{1000}, labels});
  auto r = runTensorRule("ClassImbalance", {{"labels_regex", "labels_0"}, {"predictions_regex", "labels_0"}}, t);
  EXPECT_EQ(stepsOf(r.findings), std::vector<int64_t>{3});
}

TEST(ClassImbalance, SamplesRatioAndMispredictionEdges) {
  auto trial = [](int zeros, int ones, int wrongOnes) {
    MemoryTrial t;
    std::vector<double> labels, preds;
    for (int i = 0; i < zeros; ++i) labels.push_back(0), preds.push_back(0);
    for (int i = 0; i < ones; ++i) labels.push_back(1), preds.push_back(i < wrongOnes ? 0 : 1);
    t.add(0, "y_labels", {{int64_t(labels.size())}, labels});
    t.add(0, "y_predictions", {{int64_t(preds.size())}, preds});
    return t;
  };
  EXPECT_TRUE(runTensorRule("ClassImbalance", json::object(), trial(450, 49, 0)).findings.empty());  // 499 < samples
  EXPECT_TRUE(runTensorRule("ClassImbalance", json::object(), trial(500, 50, 0)).findings.empty());  // ratio 10, not > 10
  EXPECT_FALSE(runTensorRule("ClassImbalance", json::object(), trial(501, 50, 0)).findings.empty());
  EXPECT_FALSE(runTensorRule("ClassImbalance", json::object(), trial(300, 300, 211)).findings.empty());  // 70.3% wrong
  EXPECT_TRUE(runTensorRule("ClassImbalance", json::object(), trial(300, 300, 210)).findings.empty());   // 70% exactly
}

// test_confusion.py.
TEST(Confusion, GoldenCases) {
  MemoryTrial identity;
  std::vector<double> y;
  for (int i = 0; i < 100; ++i) y.push_back((i * 7) % 10);
  identity.add(0, "y", {{100}, y});
  identity.add(0, "y_hat", {{100}, y});
  identity.setCollection("labels", {"y"});
  identity.setCollection("preds", {"y_hat"});
  EXPECT_TRUE(runTensorRule("Confusion", {{"labels_collection", "labels"}, {"predictions_collection", "preds"}}, identity)
                  .findings.empty());

  MemoryTrial off;
  std::vector<double> labels, preds;
  for (int i = 0; i < 10; ++i) labels.push_back(i), preds.push_back(i == 4 ? 7 : i);
  off.add(1, "foo", {{10}, labels});
  off.add(1, "bar", {{10}, preds});
  EXPECT_EQ(stepsOf(runTensorRule("Confusion", {{"category_no", 10}, {"labels", "foo"}, {"predictions", "bar"}}, off).findings),
            std::vector<int64_t>{1});
  EXPECT_EQ(runTensorRule("Confusion",
                          {{"category_no", 10}, {"labels", "foo"}, {"predictions", "bar"}, {"min_diag", 0.0}, {"max_off_diag", 0.01}},
                          off)
                .findings.size(),
            1u);

  MemoryTrial defaults;
  defaults.add(1, "labels", {{10}, labels});
  defaults.add(1, "predictions", {{10}, labels});
  EXPECT_TRUE(runTensorRule("Confusion", json::object(), defaults).findings.empty());
}

TEST(VanishingGradient, ThresholdIsStrictAndUsesStoredReductions) {
  MemoryTrial t;
  t.add(0, "gradient/fc.weight", {{2}, {1e-8, -1e-8}});
  t.add(1, "gradient/fc.weight", {{2}, {1e-7, -1e-7}});
  t.addReduction(2, "gradient/fc.bias", "mean", true, 1e-9);
  auto r = runTensorRule("VanishingGradient", json::object(), t);
  EXPECT_EQ(stepsOf(r.findings), (std::vector<int64_t>{0, 2}));
}

TEST(AllZero, PercentOfZeros) {
  MemoryTrial t;
  std::vector<double> v(100, 0.0);
  t.add(0, "a", {{100}, v});
  v[0] = 1;
  t.add(1, "a", {{100}, v});
  EXPECT_EQ(stepsOf(runTensorRule("AllZero", {{"tensor_regex", "a"}}, t).findings), std::vector<int64_t>{0});
  EXPECT_EQ(stepsOf(runTensorRule("AllZero", {{"tensor_regex", "a"}, {"threshold", 99}}, t).findings),
            (std::vector<int64_t>{0, 1}));
  Engine e;
  EXPECT_THROW(e.addRules({RuleSpec{"AllZero", json::object()}}), ConfigError);  // needs a selection
}

TEST(TensorVariance, Bounds) {
  MemoryTrial t;
  t.add(0, "w", {{2}, {-2, 2}});      // variance 4
  t.add(1, "w", {{2}, {-0.1, 0.1}});  // 0.01
  EXPECT_EQ(stepsOf(runTensorRule("TensorVariance", {{"max_threshold", 3}}, t).findings), std::vector<int64_t>{0});
  EXPECT_EQ(stepsOf(runTensorRule("TensorVariance", {{"min_threshold", 0.01}}, t).findings), std::vector<int64_t>{});
  EXPECT_EQ(stepsOf(runTensorRule("TensorVariance", {{"min_threshold", 0.02}}, t).findings), std::vector<int64_t>{1});
}

TEST(WeightUpdateRatio, LargeAndSmallUpdates) {
  MemoryTrial t;
  t.add(0, "fc.weight", {{2}, {1, 1}}, Mode::kTrain);
  t.add(1, "fc.weight", {{2}, {1 + 1e-10, 1}}, Mode::kTrain);  // ratio ~7e-11 < 1e-8
  t.add(2, "fc.weight", {{2}, {2, 2}}, Mode::kTrain);          // ratio ~1
  t.add(3, "fc.weight", {{2}, {26, 26}}, Mode::kTrain);        // ratio 12 > 10
  t.add(4, "fc.weight", {{2}, {999, 999}}, Mode::kEval);       // EVAL steps are skipped
  auto r = runTensorRule("WeightUpdateRatio", json::object(), t);
  EXPECT_EQ(stepsOf(r.findings), (std::vector<int64_t>{1, 3}));
  // num_steps: compared with the newest saved step at least 2 earlier.
  EXPECT_EQ(stepsOf(runTensorRule("WeightUpdateRatio", {{"num_steps", 2}}, t).findings), (std::vector<int64_t>{3}));
}

TensorValue activations(int batch, int units, int deadUnits, double on, double off = 0) {
  TensorValue v{{batch, units}, {}};
  for (int b = 0; b < batch; ++b)
    for (int u = 0; u < units; ++u) v.data.push_back(u < deadUnits ? off : on);
  return v;
}

TEST(DeadRelu, LayerShareOfDeadUnits) {
  MemoryTrial t;
  t.add(0, "net.relu_output_0", activations(100, 4, 3, 1.0));  // 75% dead
  t.add(1, "net.relu_output_0", activations(100, 4, 2, 1.0));  // 50%: not > 50
  EXPECT_EQ(stepsOf(runTensorRule("DeadRelu", json::object(), t).findings), std::vector<int64_t>{0});
}

TEST(SaturatedActivation, TanhAndSigmoidBounds) {
  MemoryTrial t;
  t.add(0, "net.tanh_input_0", activations(10, 4, 3, 0.5, 10.0));    // 3 of 4 units at 10 > 9.4999
  t.add(1, "net.sigmoid_input_0", activations(10, 4, 3, 0.5, 10.0));  // 10 is inside sigmoid's range
  EXPECT_EQ(stepsOf(runTensorRule("SaturatedActivation", json::object(), t).findings), std::vector<int64_t>{0});
}

TEST(PoorWeightInitialization, VarianceRatioWithinTheFirstSteps) {
  MemoryTrial t;
  for (int s = 0; s < 12; ++s) {
    const double spread = s == 11 ? 10.0 : 1.0;
    t.add(s, "l1.relu_input_0", {{2}, {-1, 1}});           // variance 1
    t.add(s, "l2.relu_input_0", {{2}, {-spread, spread}});  // variance 1 (100 at step 11)
    t.add(s, "gradient/w", {{3}, {-0.1, 0.0, 0.1}});
  }
  EXPECT_TRUE(runTensorRule("PoorWeightInitialization", json::object(), t).findings.empty());  // step 11 not analysed
  EXPECT_EQ(stepsOf(runTensorRule("PoorWeightInitialization", {{"steps", 12}}, t).findings), std::vector<int64_t>{11});
  MemoryTrial tiny;
  tiny.add(0, "gradient/w", {{3}, {-1e-5, 0.0, 1e-5}});  // p95 - p5 = 1.8e-5 < 0.001
  EXPECT_FALSE(runTensorRule("PoorWeightInitialization", json::object(), tiny).findings.empty());
}

TEST(Overfit, ValidationAboveTraining) {
  auto trial = [](double val) {
    MemoryTrial t;
    for (int s = 0; s < 5; ++s) t.addScalar(s, "loss", 1.0, Mode::kTrain, s);
    t.addScalar(5, "loss", val, Mode::kEval, 0);
    t.addScalar(6, "loss", val, Mode::kEval, 1);
    return t;
  };
  EXPECT_EQ(stepsOf(runTensorRule("Overfit", json::object(), trial(1.2)).findings), (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(stepsOf(runTensorRule("Overfit", {{"patience", 2}}, trial(1.2)).findings), std::vector<int64_t>{6});
  EXPECT_TRUE(runTensorRule("Overfit", json::object(), trial(1.05)).findings.empty());
}

TEST(Overtraining, PatienceWithoutImprovement) {
  MemoryTrial t;
  const std::vector<double> v = {1.0, 0.9, 0.895, 0.89, 0.9, 0.899, 0.891};
  for (size_t i = 0; i < v.size(); ++i) t.addScalar(int64_t(i), "loss", v[i], Mode::kTrain, int64_t(i));
  // Best 0.9 at step 1; steps 2..6 improve by less than delta 0.01: the 5th is step 6.
  EXPECT_EQ(stepsOf(runTensorRule("Overtraining", json::object(), t).findings), std::vector<int64_t>{6});
  EXPECT_TRUE(runTensorRule("Overtraining", {{"patience_train", 6}}, t).findings.empty());
}

TEST(StalledTrainingRule, WallClockThreshold) {
  auto run = [](double now) {
    double clock = now;
    EngineOptions opts;
    opts.clock = [&clock] { return clock; };
    Engine engine(opts);
    engine.addRules({RuleSpec{"StalledTrainingRule", {{"threshold", 1800}}}});
    auto src = std::make_unique<MemoryTensorSource>();
    src->mutableTrial().addScalar(0, "loss", 1.0);
    src->mutableTrial().setLastUpdate(1000);
    engine.setTensorSource(std::move(src));
    return engine.poll();
  };
  EXPECT_TRUE(run(2800).empty());
  EXPECT_EQ(run(2801).size(), 1u);
}

TEST(StalledTrainingRule, OfflineGapsBetweenSteps) {
  MemoryTrial t;
  t.add(0, "loss", {{1}, {1.0}}, Mode::kTrain, 0, 100.0);
  t.add(1, "loss", {{1}, {1.0}}, Mode::kTrain, 1, 200.0);
  t.add(2, "loss", {{1}, {1.0}}, Mode::kTrain, 2, 2100.0);
  t.setFinished();
  EXPECT_EQ(stepsOf(runTensorRule("StalledTrainingRule", json::object(), t).findings), std::vector<int64_t>{2});
}

}  // namespace
}  // namespace strata::rules::testing
