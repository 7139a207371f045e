// The runtime-facing session: framework_profile windows, step events and the always-on
// step timer, user ranges (STRATA_PROFILE / Range), flush, and robustness (disabled,
// unwritable output). Deterministic: a ManualClock drives every timestamp.
#include <gtest/gtest.h>

#include <thread>

#include "profiler/framework_window.h"
#include "profiler/layout.h"
#include "profiler/session.h"
#include "profiler/step_times.h"
#include "profiler/timeline_reader.h"
#include "profiler_test_util.h"
#include "strata/profiler.h"

namespace strata::profiler {
namespace {

using testing::stepWindow;
using testing::TempDir;

constexpr int64_t kT0Us = 1700000000000000;

SessionInfo info(const TempDir& dir, std::shared_ptr<ManualClock> clock, int rank = 0) {
  SessionInfo i;
  i.outputDir = dir.str();
  i.rank = rank;
  i.worldSize = 2;
  i.hostname = "host-a";
  i.clock = std::move(clock);
  return i;
}

// Runs steps [0, numSteps): each 1000 µs, with a compute slice inside and a data-loading
// slice in the gap before it.
void runSteps(Session& s, ManualClock& clock, int numSteps) {
  for (int step = 0; step < numSteps; ++step) {
    s.recordSlice("load", phases::kDataLoaderIter, Track::kDataLoading, clock.nowUs(), 100);
    clock.advance(100);
    s.stepBegin(step);
    s.recordSlice("fc1", phases::kForward, Track::kCompute, clock.nowUs() + 10, 500,
                  {{"layer", 0}});
    clock.advance(1000);
    s.stepEnd(step);
  }
}

// The timeline events of a stopped session: those of `phase`, or (phase empty) those whose
// name contains `nameContains`.
std::vector<TraceEvent> eventsOf(Session& s, const std::string& phase, const std::string& nameContains = "") {
  TimelineReader reader(s.profilerRoot());
  TraceQuery q;
  q.phase = phase;
  q.nameContains = nameContains;
  return reader.events(q);
}

TEST(FrameworkWindow, StepRangeIncludesTheGapsBetweenItsSteps) {
  const auto w = FrameworkWindow::from(stepWindow(5, 2).frameworkProfile);
  EXPECT_TRUE(w.configured());
  EXPECT_FALSE(w.activeAtStart(0));
  EXPECT_FALSE(w.activeAtStepBegin(4, 0));
  EXPECT_TRUE(w.activeAfterStepEnd(4, 0));  // data loading for step 5
  EXPECT_TRUE(w.activeAtStepBegin(5, 0));
  EXPECT_TRUE(w.activeAtStepBegin(6, 0));
  EXPECT_FALSE(w.activeAfterStepEnd(6, 0));
  EXPECT_FALSE(w.activeAtStepBegin(7, 0));
  EXPECT_TRUE(FrameworkWindow::from(stepWindow(0, 1).frameworkProfile).activeAtStart(0));
  EXPECT_FALSE(FrameworkWindow::from(std::nullopt).configured());
  EXPECT_FALSE(FrameworkWindow::from(std::nullopt).activeAtStepBegin(0, 0));
}

TEST(FrameworkWindow, TimeRange) {
  config::FrameworkProfile p;
  p.startUnixTime = std::chrono::seconds(1700000000);
  p.duration = std::chrono::duration<double>(2.5);
  const auto w = FrameworkWindow::from(p);
  EXPECT_TRUE(w.byTime());
  EXPECT_FALSE(w.activeAtStepBegin(0, kT0Us - 1));
  EXPECT_TRUE(w.activeAtStepBegin(0, kT0Us));
  EXPECT_TRUE(w.activeAtTime(kT0Us + 2'499'999));
  EXPECT_FALSE(w.activeAtTime(kT0Us + 2'500'000));
  EXPECT_FALSE(w.activeAfterStepEnd(3, kT0Us + 3'000'000));
}

TEST(Session, StepWindowLimitsDetailedSlicesButStepEventsCoverEveryStep) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>(kT0Us);
  auto s = Session::start(stepWindow(2, 2), info(dir, clock));
  ASSERT_TRUE(s->enabled());
  EXPECT_EQ(s->nodeId(), "0-algo-1");
  EXPECT_EQ(s->baseUs(), kT0Us);
  runSteps(*s, *clock, 6);
  s->stop();

  const auto stepEvents = eventsOf(*s, "Step:ModeKeys.TRAIN");
  // Every step, as smdebug's hook writes them (its job statistics need step 0); only the
  // detailed slices are limited to the window.
  ASSERT_EQ(stepEvents.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(stepEvents[i].name, "Step:ModeKeys.TRAIN");
    EXPECT_EQ(stepEvents[i].stepNum(), i);
    EXPECT_EQ(stepEvents[i].durUs, 1000);
    EXPECT_EQ(stepEvents[i].tid, trackId(Track::kSteps));
  }
  EXPECT_EQ(eventsOf(*s, phases::kForward).size(), 2u);  // detailed: steps 2 and 3 only
  const auto loadEvents = eventsOf(*s, phases::kDataLoaderIter);
  ASSERT_EQ(loadEvents.size(), 2u);  // the gaps before steps 2 and 3
  EXPECT_EQ(loadEvents[0].stepNum(), 1);  // recorded while step 1 was the last step

  const auto times = readStepTimes(s->profilerRoot());
  ASSERT_EQ(times.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(times[i].step, i);
    EXPECT_EQ(times[i].durUs, 1000);
    EXPECT_EQ(times[i].mode, "TRAIN");
  }
  EXPECT_EQ(s->stats().stepsRecorded, 6u);
  EXPECT_EQ(s->stats().eventsDropped, 0u);
}

TEST(Session, WithoutFrameworkProfileOnlyStepsAndModelSlicesAreRecorded) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>(kT0Us);
  auto s = Session::start(config::ProfilerConfig{}, info(dir, clock));
  runSteps(*s, *clock, 3);
  EXPECT_FALSE(s->timelineActive());
  EXPECT_TRUE(s->recordsSteps());
  s->stepBegin(3);
  s->recordModelSlice("Net", phases::kBackward, Track::kCompute, clock->nowUs(), 200);
  clock->advance(300);
  s->stepEnd(3);
  s->stop();
  EXPECT_FALSE(s->recordsSteps());
  EXPECT_EQ(eventsOf(*s, "", "Step:ModeKeys").size(), 4u);
  const auto model = eventsOf(*s, phases::kBackward);
  ASSERT_EQ(model.size(), 1u);
  EXPECT_EQ(model[0].name, "Net");
  EXPECT_EQ(model[0].stepNum(), 3);
  EXPECT_TRUE(eventsOf(*s, phases::kDataLoaderIter).empty());
  EXPECT_TRUE(eventsOf(*s, phases::kForward).empty());  // recordSlice: detailed, window only
  EXPECT_EQ(readStepTimes(s->profilerRoot()).size(), 4u);
}

TEST(Session, StepNumIsTheModeStepAsSmdebugWritesIt) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>(kT0Us);
  auto s = Session::start(stepWindow(0, 1), info(dir, clock));
  struct Step { Mode mode; int64_t modeStep; };
  const Step plan[] = {{Mode::kTrain, 0}, {Mode::kTrain, 1}, {Mode::kEval, 0}, {Mode::kEval, 1},
                       {Mode::kPredict, 0}, {Mode::kTrain, 2}};
  for (int64_t global = 0; global < 6; ++global) {
    s->stepBegin(global, plan[global].mode, plan[global].modeStep);
    s->recordModelSlice("Net", phases::kForward, Track::kCompute, clock->nowUs(), 10);
    clock->advance(100);
    s->stepEnd(global);
  }
  s->stop();
  const auto events = eventsOf(*s, "", "Step:ModeKeys");
  ASSERT_EQ(events.size(), 6u);
  const auto forwards = eventsOf(*s, phases::kForward);
  ASSERT_EQ(forwards.size(), 6u);  // model-level: outside the window [0, 1) too
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(events[i].name, std::string(stepPhaseName(plan[i].mode))) << i;
    EXPECT_EQ(events[i].stepNum(), plan[i].modeStep) << i;
    EXPECT_EQ(forwards[i].stepNum(), plan[i].modeStep) << i;
  }
  const auto times = readStepTimes(s->profilerRoot());
  ASSERT_EQ(times.size(), 6u);
  EXPECT_EQ(times[3].step, 3);  // the step timer keeps the global step
  EXPECT_EQ(times[3].mode, "EVAL");
}

TEST(Session, EvalModeStepsAndUnmatchedEnds) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>(kT0Us);
  auto s = Session::start(stepWindow(0, 10), info(dir, clock));
  s->stepEnd(0);  // no begin: ignored
  s->stepBegin(0, Mode::kEval);
  clock->advance(50);
  s->stepEnd(1);  // wrong step: ignored
  s->stepEnd(0);
  s->stop();
  TraceQuery q;
  q.nameContains = "Step:ModeKeys";
  const auto events = TimelineReader(s->profilerRoot()).events(q);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].name, "Step:ModeKeys.EVAL");
  EXPECT_EQ(events[0].durUs, 50);
  ASSERT_EQ(readStepTimes(s->profilerRoot()).size(), 1u);
  EXPECT_EQ(readStepTimes(s->profilerRoot())[0].mode, "EVAL");
}

TEST(Session, TimeWindowFollowsTheClock) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>(kT0Us);
  config::ProfilerConfig c;
  c.frameworkProfile = config::FrameworkProfile{};
  c.frameworkProfile->startUnixTime = std::chrono::seconds(1700000001);
  c.frameworkProfile->duration = std::chrono::duration<double>(1.0);
  auto s = Session::start(c, info(dir, clock));
  s->stepBegin(0);
  EXPECT_FALSE(s->timelineActive());
  s->recordSlice("early", phases::kForward, Track::kCompute, clock->nowUs(), 10);
  s->stepEnd(0);
  clock->set(kT0Us + 1'500'000);
  s->stepBegin(1);
  EXPECT_TRUE(s->timelineActive());
  s->recordSlice("inside", phases::kForward, Track::kCompute, clock->nowUs(), 10);
  s->stepEnd(1);
  clock->set(kT0Us + 2'500'000);  // past the end: the writer's tick turns it off
  for (int i = 0; i < 50 && s->timelineActive(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(s->timelineActive());
  s->stop();
  TraceQuery q;
  q.phase = phases::kForward;
  const auto events = TimelineReader(s->profilerRoot()).events(q);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].name, "inside");
}

TEST(Session, FlushMakesTheTimelineVisibleBeforeStop) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>(kT0Us);
  auto s = Session::start(stepWindow(0, 100), info(dir, clock));
  runSteps(*s, *clock, 2);
  EXPECT_TRUE(s->flush(std::chrono::seconds(5)));
  EXPECT_EQ(TimelineReader(s->profilerRoot()).fileStampsUs().size(), 1u);
  EXPECT_EQ(readStepTimes(s->profilerRoot()).size(), 2u);
  EXPECT_EQ(s->stats().traceFilesClosed, 1u);
  runSteps(*s, *clock, 1);
  s->stop();
  EXPECT_EQ(TimelineReader(s->profilerRoot()).fileStampsUs().size(), 2u);
}

TEST(Session, DisabledProfilerWritesNothing) {
  TempDir dir;
  config::ProfilerConfig c = stepWindow(0, 10);
  c.disableProfiler = true;
  auto s = Session::start(c, info(dir, std::make_shared<ManualClock>(kT0Us)));
  ASSERT_NE(s, nullptr);
  EXPECT_FALSE(s->enabled());
  EXPECT_EQ(current(), nullptr);
  s->stepBegin(0);
  s->recordSlice("x", phases::kForward, Track::kCompute, 0, 1);
  s->stepEnd(0);
  EXPECT_TRUE(s->flush());
  s->stop();
  EXPECT_FALSE(std::filesystem::exists(dir.path() / kProfilerDirName));
}

TEST(Session, UnwritableOutputNeverFailsTheJob) {
  TempDir dir;
  testing::writeFile(dir.path() / kProfilerDirName, "a file where the folder should be");
  auto clock = std::make_shared<ManualClock>(kT0Us);
  auto s = Session::start(stepWindow(0, 10), info(dir, clock));
  ASSERT_NE(s, nullptr);
  runSteps(*s, *clock, 3);
  EXPECT_TRUE(s->flush(std::chrono::seconds(5)));
  s->stop();
  EXPECT_EQ(s->stats().stepsRecorded, 3u);
  EXPECT_FALSE(markTrainingJobEnd(dir.str()));
}

void userWork() {
  STRATA_PROFILE("outer");
  { Range inner(std::string("inner ") + "range"); }
}

TEST(Ranges, LandInTheCurrentSessionOnlyWhileItsTimelineIsOn) {
  userWork();  // no session: nothing happens
  EXPECT_FALSE(detail::gRangesOn.load());
  TempDir dir;
  auto clock = std::make_shared<ManualClock>(kT0Us);
  auto s = Session::start(stepWindow(1, 1), info(dir, clock));
  EXPECT_EQ(current(), s.get());
  s->stepBegin(0);
  EXPECT_FALSE(detail::gRangesOn.load());
  userWork();  // outside the window
  s->stepEnd(0);  // the gap before step 1 is in the window
  EXPECT_TRUE(detail::gRangesOn.load());
  s->stepBegin(1);
  {
    STRATA_PROFILE("outer");
    clock->advance(10);
    {
      Range inner(std::string("inner"));
      clock->advance(5);
    }
    ScopedSlice slice("opt step", phases::kOptimizer, Track::kCompute);
    clock->advance(3);
  }
  s->stepEnd(1);
  s->stop();
  EXPECT_EQ(current(), nullptr);
  EXPECT_FALSE(detail::gRangesOn.load());
  userWork();  // after stop: nothing happens

  TraceQuery q;
  q.phase = phases::kUserRange;
  const auto ranges = TimelineReader(dir.str() + "/" + kProfilerDirName).events(q);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].name, "inner");  // recorded when it ended, first
  EXPECT_EQ(ranges[0].durUs, 5);
  EXPECT_EQ(ranges[1].name, "outer");
  EXPECT_EQ(ranges[1].durUs, 18);
  EXPECT_EQ(ranges[0].tid, ranges[1].tid);
  EXPECT_GE(ranges[0].tid, kUserTrackBase);
  q.phase = phases::kOptimizer;
  EXPECT_EQ(TimelineReader(dir.str() + "/" + kProfilerDirName).events(q).size(), 1u);
}

TEST(Ranges, OnlyOneSessionIsCurrent) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>(kT0Us);
  auto first = Session::start(stepWindow(0, 10), info(dir, clock, 0));
  SessionInfo secondInfo = info(dir, clock, 1);
  secondInfo.makeCurrent = false;
  auto second = Session::start(stepWindow(0, 10), std::move(secondInfo));
  EXPECT_EQ(current(), first.get());
  second->stop();
  EXPECT_EQ(current(), first.get());  // stopping another session leaves it alone
  first->stop();
  EXPECT_EQ(current(), nullptr);
}

TEST(JobEnd, MarkersForProfilerTrial) {
  TempDir dir;
  EXPECT_TRUE(markTrainingJobEnd(dir.str()));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "profiler-output/system/training_job_end.ts"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "profiler-output/framework/training_job_end.ts"));
}

}  // namespace
}  // namespace strata::profiler
