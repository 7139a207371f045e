// LossNotDecreasing's smoothing (Strata's parameter) and its handling of non-finite losses:
// a healthy, noisy loss curve must not fire once smoothed (it does with smdebug's single-loss
// comparison), a diverging one must fire, and a NaN loss counts as "did not decrease".
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "rules_test_util.h"

namespace strata::rules::testing {
namespace {

using json = nlohmann::json;

// A loss saved every `every` steps for `steps` steps: `curve(step)` times a noise factor in
// [1 - noise, 1 + noise] (mt19937's raw output, so the same on every platform).
template <typename Curve>
MemoryTrial noisyLoss(int64_t steps, int64_t every, double noise, Curve curve, uint32_t seed = 7) {
  std::mt19937 gen(seed);
  MemoryTrial t;
  for (int64_t s = 0; s < steps; s += every) {
    const double u = static_cast<double>(gen()) / static_cast<double>(std::mt19937::max());  // [0, 1]
    t.addScalar(s, "Loss_output_0", curve(s) * (1 + noise * (2 * u - 1)), Mode::kTrain, s);
  }
  t.setCollection("losses", {"Loss_output_0"});
  return t;
}

// Fashion-MNIST's healthy curve: 2.3 falling towards 0.35, with the ±30 % noise of 32-sample
// minibatches; saved every 10 steps (the example's losses collection) for 300 steps.
double healthy(int64_t s) { return 0.35 + 1.95 * std::exp(-static_cast<double>(s) / 60); }

TEST(LossSmoothing, HealthyNoisyRunFiresWithSingleLossesButNotSmoothed) {
  const MemoryTrial t = noisyLoss(300, 10, 0.3, healthy);
  // smdebug's semantics (the defaults): minibatch noise fires on a healthy run.
  const auto plain = runTensorRule("LossNotDecreasing", json::object(), t);
  EXPECT_GE(plain.findings.size(), 5u);
  // The window mean of 10 saved losses, compared 100 steps apart: quiet.
  const json mean = {{"smoothing", "mean"}, {"smoothing_window", 10}, {"num_steps", 100}};
  const auto smoothed = runTensorRule("LossNotDecreasing", mean, t);
  EXPECT_TRUE(smoothed.findings.empty()) << smoothed.findings.front().message;
  EXPECT_EQ(smoothed.summary.status, RuleStatus::kNoIssuesFound);
  const json ema = {{"smoothing", "ema"}, {"smoothing_window", 10}, {"num_steps", 100}};
  EXPECT_TRUE(runTensorRule("LossNotDecreasing", ema, t).findings.empty());
  // The parameters show up in the report only when used.
  EXPECT_NE(smoothed.report["RuleParameters"].get<std::string>().find("smoothing:mean"), std::string::npos);
  EXPECT_EQ(plain.report["RuleParameters"].get<std::string>().find("smoothing"), std::string::npos);
}

TEST(LossSmoothing, DivergingRunFiresSmoothed) {
  // Healthy for 300 steps, then the loss climbs 1 % per step.
  auto diverging = [](int64_t s) { return s < 300 ? healthy(s) : healthy(300) * std::pow(1.01, s - 300); };
  const MemoryTrial t = noisyLoss(600, 10, 0.3, diverging);
  for (const char* kind : {"mean", "ema"}) {
    const auto r = runTensorRule("LossNotDecreasing",
                                 {{"smoothing", kind}, {"smoothing_window", 10}, {"num_steps", 100}}, t);
    ASSERT_FALSE(r.findings.empty()) << kind;
    EXPECT_GT(r.findings.front().step, 300) << kind;  // not before the divergence
    EXPECT_LE(r.findings.front().step, 500) << kind;
    EXPECT_NE(r.findings.front().message.find("(smoothed)"), std::string::npos) << r.findings.front().message;
  }
}

TEST(LossSmoothing, WindowMustFillBeforeTheFirstCheck) {
  // A mean over 4 saved losses: the first smoothed value exists at the 4th saved step (12),
  // the first check num_steps (8) later, at step 20; a rise is visible there.
  MemoryTrial t;
  const double losses[] = {1, 1, 1, 1, 1, 1, 2, 2, 2, 2};
  for (int i = 0; i < 10; ++i) t.addScalar(i * 4, "loss", losses[i]);
  const auto r = runTensorRule("LossNotDecreasing", {{"smoothing", "mean"}, {"smoothing_window", 4}, {"num_steps", 8}}, t);
  // Smoothed: steps 12..36 -> 1, 1, 1, 1.25, 1.5, 1.75, 2; checks at 20 (1 vs 1 at 12: fires,
  // the rule's "did not decrease"), 28 (1.5 vs 1 at 20), 36 (2 vs 1.5 at 28).
  EXPECT_EQ(stepsOf(r.findings), (std::vector<int64_t>{20, 28, 36}));
}

TEST(LossSmoothing, BadParametersAreNamed) {
  MemoryTrial t;
  t.addScalar(0, "loss", 1);
  EXPECT_THROW(runTensorRule("LossNotDecreasing", {{"smoothing", "median"}}, t), ConfigError);
  EXPECT_THROW(runTensorRule("LossNotDecreasing", {{"smoothing_window", 0}}, t), ConfigError);
}

TEST(LossNotDecreasingNaN, NonFiniteLossFiresAtTheNextCheck) {
  // A NaN loss did not decrease: the check at step 12 fires (smdebug's comparison is false
  // for NaN, which let a diverged run go on).
  MemoryTrial t;
  const double losses[] = {1, 0.9, 0.8, std::numeric_limits<double>::quiet_NaN(), 0.7};
  for (int i = 0; i < 5; ++i) t.addScalar(i * 4, "loss", losses[i]);
  const auto r = runTensorRule("LossNotDecreasing", {{"num_steps", 4}}, t);
  EXPECT_EQ(stepsOf(r.findings), (std::vector<int64_t>{12}));
  MemoryTrial inf;
  const double big[] = {1, 0.9, std::numeric_limits<double>::infinity()};
  for (int i = 0; i < 3; ++i) inf.addScalar(i * 4, "loss", big[i]);
  EXPECT_EQ(stepsOf(runTensorRule("LossNotDecreasing", {{"num_steps", 4}}, inf).findings), (std::vector<int64_t>{8}));
}

}  // namespace
}  // namespace strata::rules::testing
