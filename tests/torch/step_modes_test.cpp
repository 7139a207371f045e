// The mode of a DistributedModel's steps and their numbering (src/adapter/observe/step_modes.h):
// smdebug's model, where an evaluation pass after training is EVAL steps and set_mode picks
// PREDICT.
#include <gtest/gtest.h>

#include "adapter/observe/step_modes.h"

namespace strata::adapter {
namespace {

TEST(StepModes, TrainingDecidesUnlessAModeWasChosen) {
  EXPECT_EQ(observedMode(std::nullopt, true), Mode::kTrain);
  EXPECT_EQ(observedMode(std::nullopt, false), Mode::kEval);
  EXPECT_EQ(observedMode(Mode::kPredict, false), Mode::kPredict);
  EXPECT_EQ(observedMode(Mode::kGlobal, true), Mode::kGlobal);
}

TEST(StepModes, OnlyNonTrainingForwardsOutsideStepAreSteps) {
  EXPECT_TRUE(forwardIsItsOwnStep(false, Mode::kEval));
  EXPECT_TRUE(forwardIsItsOwnStep(false, Mode::kPredict));
  EXPECT_TRUE(forwardIsItsOwnStep(false, Mode::kGlobal));
  EXPECT_FALSE(forwardIsItsOwnStep(false, Mode::kTrain));
  EXPECT_FALSE(forwardIsItsOwnStep(true, Mode::kEval));  // the forward of an EVAL step()
}

TEST(StepModes, GlobalStepCountsEveryModeAndEachModeItsOwn) {
  StepCounter c;
  struct Expect { Mode mode; int64_t global, modeStep; };
  const Expect plan[] = {{Mode::kTrain, 0, 0}, {Mode::kTrain, 1, 1}, {Mode::kEval, 2, 0},  {Mode::kEval, 3, 1},
                         {Mode::kTrain, 4, 2}, {Mode::kPredict, 5, 0}, {Mode::kEval, 6, 2}};
  for (const Expect& e : plan) {
    const auto n = c.next(e.mode);
    EXPECT_EQ(n.global, e.global);
    EXPECT_EQ(n.modeStep, e.modeStep) << e.global;
  }
  c.resume(10);
  EXPECT_EQ(c.next(Mode::kTrain).global, 10);
  const auto eval = c.next(Mode::kEval);
  EXPECT_EQ(eval.global, 11);
  EXPECT_EQ(eval.modeStep, 0);
}

}  // namespace
}  // namespace strata::adapter
