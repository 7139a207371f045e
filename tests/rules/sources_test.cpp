// The file adapters: a trial written by the debugger's writer, and profiler-output/ files in
// the formats of specs/smdebug.md §2, read through the engine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "debugger/trial_writer.h"
#include "rules/run.h"
#include "rules/sources/file_sources.h"
#include "rules_test_util.h"
#include "trial_writing.h"

namespace strata::rules::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

TEST(TrialSource, DebuggerTrialThroughTheEngine) {
  const fs::path dir = freshTempDir("sources_trial");
  {
    auto writer = lossesTrialWriter(dir.string());
    debugger::TrialWriter& w = *writer;
    const debugger::TensorPlan plan = rawValues();
    for (int step = 0; step < 3; ++step) {
      w.beginStep(step, debugger::Mode::kTrain, step, true);
      w.tensor("CrossEntropyLoss_output_0", debugger::DType::kFloat32, {1}, bytesOf({1.0f - 0.1f * step}), plan);
      w.tensor("gradient/Net_fc.weight", debugger::DType::kFloat32, {2},
               bytesOf({step == 2 ? std::numeric_limits<float>::quiet_NaN() : 0.5f, 0.25f}), plan);
      w.endStep();
    }
    w.close();
    ASSERT_EQ(w.firstError(), "");
  }
  std::ofstream(dir / "training_job_end.ts").close();
  auto source = makeTrialSource(dir.string());
  ASSERT_NE(source, nullptr);
  source->refresh();
  const Trial& t = source->trial();
  ASSERT_EQ(t.steps().size(), 3u);
  EXPECT_EQ(t.steps()[1].mode, Mode::kTrain);
  EXPECT_FALSE(std::isnan(t.steps()[1].wallTimeSec));
  EXPECT_TRUE(t.finished());
  EXPECT_EQ(t.tensorNames().size(), 2u);
  auto v = t.value("CrossEntropyLoss_output_0", 1);
  ASSERT_TRUE(v);
  EXPECT_NEAR(v->data[0], 0.9, 1e-6);

  Engine engine;
  engine.addRules({RuleSpec{"ExplodingTensor"}, RuleSpec{"LossNotDecreasing", {{"num_steps", 1}}}});
  engine.setTensorSource(std::move(source));
  const auto findings = engine.finish();
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].rule, "ExplodingTensor");
  EXPECT_EQ(findings[0].step, 2);
  fs::remove_all(dir);
  EXPECT_EQ(makeTrialSource(dir.string()), nullptr);
}

// Three minutes of one host (2 cores, 1 GPU, every 500 ms), a trace file and the step timer.
fs::path writeProfilerRun(bool endMarker) {
  const fs::path run = freshTempDir("sources_profiler");
  const fs::path root = run / "profiler-output";
  const int64_t t0 = 1599999960;  // a whole minute, 2020-09-13 12:26 UTC
  for (int m = 0; m < 3; ++m) {
    const fs::path d = root / "system" / "incremental" / "2020091312";
    fs::create_directories(d);
    std::ofstream f(d / (std::to_string(t0 + 60 * m) + ".algo-1.json"));
    for (int i = 0; i < 120; ++i) {
      const double ts = t0 + 60 * m + i * 0.5;
      for (int c = 0; c < 2; ++c)
        f << json{{"Type", "cpu"}, {"Name", "cpu" + std::to_string(c)}, {"Dimension", "CPUUtilization"}, {"Value", 40},
                  {"NodeId", "algo-1"}, {"Timestamp", ts}}
                 .dump()
          << "\n";
      f << json{{"Type", "gpu"}, {"Name", "gpu0"}, {"Dimension", "GPUUtilization"}, {"Value", 90}, {"NodeId", "algo-1"},
                {"Timestamp", ts}}
               .dump()
        << "\n";
    }
  }
  // The timeline: steps 0..9 (also in the step timer) and a forward event per step.
  const int64_t base = (t0 + 10) * 1000000LL;
  json trace = json::array({{{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"start_time_since_epoch_in_micros", base}}}},
                            {{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "Step:ModeKeys.TRAIN"}}}},
                            {{"name", "process_name"}, {"ph", "M"}, {"pid", 2}, {"args", {{"name", "Forward"}}}}});
  int64_t lastEnd = 0;
  for (int s = 0; s < 10; ++s) {
    trace.push_back({{"name", "Step:ModeKeys.TRAIN"}, {"ph", "X"}, {"pid", 1}, {"ts", s * 1000000}, {"dur", 500000},
                     {"args", {{"step_num", std::to_string(s)}}}});
    trace.push_back({{"name", "fc1"}, {"ph", "X"}, {"pid", 2}, {"ts", s * 1000000}, {"dur", 200000},
                     {"args", {{"step_num", std::to_string(s)}}}});
    lastEnd = base + s * 1000000 + 500000;
  }
  const fs::path pe = root / "framework" / "pevents" / "2020091312";
  fs::create_directories(pe);
  std::ofstream(pe / (std::to_string(lastEnd) + "_0-algo-1_pythontimeline.json")) << trace.dump();
  fs::create_directories(root / "steps");
  std::ofstream steps(root / "steps" / "0-algo-1_steps.jsonl");
  for (int s = 0; s < 150; ++s)
    steps << json{{"rank", 0}, {"node", "0-algo-1"}, {"step", s}, {"mode", "TRAIN"}, {"start_us", base + s * 1000000LL},
                  {"dur_us", 500000}}
                 .dump()
          << "\n";
  if (endMarker) {
    std::ofstream(root / "system" / "training_job_end.ts").close();
    std::ofstream(root / "framework" / "training_job_end.ts").close();
  }
  return run;
}

TEST(ProfilerSource, ReadsEveryFileOnceInTimeOrder) {
  const fs::path run = writeProfilerRun(true);
  auto engine = makeRunEngine(run.string(), {RuleSpec{"ProfilerReport"}}, EngineOptions{}, FileSourceOptions{});
  engine->finish();
  EXPECT_EQ(engine->reportJson("OverallSystemUsage")["Datapoints"], 360);  // 3 minutes of snapshots
  EXPECT_EQ(engine->reportJson("CPUBottleneck")["Datapoints"], 360);
  // Steps from the step timer only (the timeline's 10 step events are not counted twice).
  EXPECT_EQ(engine->reportJson("StepOutlier")["Datapoints"], 150);
  EXPECT_EQ(engine->reportJson("MaxInitializationTime")["Details"]["job_start"], 1599999960.0);
  const json fw = engine->reportJson("OverallFrameworkMetrics")["Details"];
  EXPECT_EQ(fw["top_layers"][0]["name"], "fc1");
  EXPECT_TRUE(engine->dataEnded());
  fs::remove_all(run);
}

TEST(ProfilerSource, CompatIgnoresTheStepTimerAndTheLastMinute) {
  const fs::path run = writeProfilerRun(true);
  EngineOptions eo;
  eo.compat = true;
  auto engine = makeRunEngine(run.string(), {RuleSpec{"ProfilerReport"}}, eo, FileSourceOptions{});
  engine->finish();
  // The reference analyses windows starting before min(newest system stamp, newest framework
  // stamp); the only trace file ends 19.5 s in, so only the first minute (inclusive end: 121
  // snapshots) is analysed.
  EXPECT_EQ(engine->reportJson("OverallSystemUsage")["Datapoints"], 121);
  EXPECT_EQ(engine->reportJson("MaxInitializationTime")["Datapoints"], 10);  // timeline step events
  fs::remove_all(run);
}

TEST(ProfilerSource, FollowingWaitsForTheEndMarker) {
  const fs::path run = writeProfilerRun(false);
  FileSourceOptions so;
  so.follow = true;
  auto engine = makeRunEngine(run.string(), {RuleSpec{"OverallSystemUsage"}}, EngineOptions{}, so);
  engine->poll();
  EXPECT_FALSE(engine->dataEnded());
  std::ofstream(run / "profiler-output" / "system" / "training_job_end.ts").close();
  engine->poll();
  EXPECT_TRUE(engine->dataEnded());
  engine->finish();
  EXPECT_EQ(engine->reportJson("OverallSystemUsage")["Datapoints"], 360);
  fs::remove_all(run);
}

TEST(RunSpecs, RulesFileJobConfigAndDefaults) {
  const fs::path run = writeProfilerRun(true);
  bool compat = false;
  std::string source;
  auto specs = loadRuleSpecs(run.string(), "", &compat, &source);
  ASSERT_EQ(specs.size(), 1u);  // profiler data only: ProfilerReport
  EXPECT_EQ(specs[0].name, "ProfilerReport");
  EXPECT_EQ(source, "defaults");
  std::ofstream(run / "job.json") << R"({"output_dir": "x", "rules": [{"name": "StepOutlier", "actions": ["StopTraining"]}]})";
  specs = loadRuleSpecs(run.string(), "", &compat, &source);
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].name, "StepOutlier");
  std::ofstream(run / "rules.json") << R"({"compat": true, "rules": [{"name": "LoadBalancing"}]})";
  specs = loadRuleSpecs(run.string(), "", &compat, &source);
  EXPECT_EQ(specs[0].name, "LoadBalancing");
  EXPECT_TRUE(compat);
  fs::remove_all(run);
}

}  // namespace
}  // namespace strata::rules::testing
