// The online rule thread (what the runtime starts on rank 0): it follows a trial while the
// debugger's writer adds steps, a StopTraining rule sets the process's stop signal, and
// strata::should_stop() reports it. The waits are bounded; nothing asserts a duration.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "../rules/trial_writing.h"
#include "debugger/trial_writer.h"
#include "rules/online.h"
#include "rules/run.h"
#include "runtime/stop.h"
#include "strata/errors.h"
#include "strata/runtime.h"

namespace strata::rules {
namespace {

namespace fs = std::filesystem;
using testing::bytesOf;

TEST(OnlineRules, StopTrainingFromTheThreadReachesShouldStop) {
  StopSignal::global().reset();
  runtime::resetStop();
  const fs::path dir = fs::temp_directory_path() / ("strata_online_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);

  OnlineRulesOptions o;
  o.runDir = dir.string();
  o.interval = std::chrono::milliseconds(50);
  // Started before any file exists, as at init.
  auto runner = startOnlineRules({RuleSpec{"LossNotDecreasing", {{"num_steps", 2}}, {"StopTraining"}},
                                  RuleSpec{"ExplodingTensor"}},
                                 o);
  ASSERT_NE(runner, nullptr);
  // The job's rules are recorded, so `strata rules RUN_DIR` later runs the same ones.
  bool compat = false;
  std::string source;
  const std::vector<RuleSpec> recorded = loadRuleSpecs(dir.string(), "", &compat, &source);
  ASSERT_EQ(recorded.size(), 2u) << source;
  EXPECT_EQ(recorded[0].name, "LossNotDecreasing");
  EXPECT_EQ(recorded[0].parameters["num_steps"], 2);
  EXPECT_EQ(recorded[0].actions, nlohmann::json::array({"StopTraining"}));
  EXPECT_EQ(recorded[1].name, "ExplodingTensor");
  EXPECT_NE(source.find("rules.json"), std::string::npos) << source;

  auto writer = testing::lossesTrialWriter(dir.string());
  debugger::TrialWriter& w = *writer;
  const debugger::TensorPlan plan = testing::rawValues();
  // The loss falls for 4 steps, then rises: the check at step 6 compares 1.2 with 0.6 at step 4.
  const std::vector<float> losses = {1.0f, 0.9f, 0.8f, 0.7f, 0.6f, 0.9f, 1.2f, 1.5f};
  int64_t stoppedAt = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int64_t step = 0; std::chrono::steady_clock::now() < deadline; ++step) {
    if (runtime::localStopCause() != runtime::StopCause::kNone) {
      stoppedAt = step;
      break;
    }
    if (step < static_cast<int64_t>(losses.size())) {
      w.beginStep(step, debugger::Mode::kTrain, step, true);
      w.tensor("loss_output_0", debugger::DType::kFloat32, {1}, bytesOf({losses[step]}), plan);
      w.endStep();
      w.flush();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  w.close();
  ASSERT_EQ(w.firstError(), "");
  ASSERT_GE(stoppedAt, 6) << "StopTraining before the loss rose, or never (60 s)";
  EXPECT_TRUE(should_stop());
  EXPECT_NE(stop_reason().find("rule LossNotDecreasing: "), std::string::npos) << stop_reason();
  EXPECT_NE(stop_reason().find("at step 6"), std::string::npos) << stop_reason();

  std::ofstream(dir / "training_job_end.ts").close();
  stopOnlineRules(runner);
  EXPECT_EQ(runner, nullptr);
  std::ifstream in(dir / "rule-output" / "LossNotDecreasing.json");
  ASSERT_TRUE(in) << "rule-output/LossNotDecreasing.json missing";
  const nlohmann::json report = nlohmann::json::parse(in);
  EXPECT_EQ(report["Status"], "IssuesFound");
  EXPECT_GE(report["RuleTriggered"].get<int64_t>(), 1);
  std::ifstream ex(dir / "rule-output" / "ExplodingTensor.json");
  ASSERT_TRUE(ex);
  EXPECT_EQ(nlohmann::json::parse(ex)["Status"], "NoIssuesFound");
  EXPECT_FALSE(StopSignal::stopFileExists(dir.string()));  // in-process: the flag, not the file

  StopSignal::global().reset();
  runtime::resetStop();
  fs::remove_all(dir);
}

TEST(OnlineRules, UsersRulesFileIsLeftAlone) {
  const fs::path dir = fs::temp_directory_path() / ("strata_online_keep_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string mine = R"({"rules": [{"name": "AllZero", "parameters": {"tensor_regex": "x"}}]})";
  std::ofstream(dir / "rules.json") << mine;
  OnlineRulesOptions o;
  o.runDir = dir.string();
  o.interval = std::chrono::milliseconds(50);
  auto runner = startOnlineRules({RuleSpec{"ExplodingTensor"}}, o);
  stopOnlineRules(runner);
  std::ifstream in(dir / "rules.json");
  std::stringstream content;
  content << in.rdbuf();
  EXPECT_EQ(content.str(), mine);
  fs::remove_all(dir);
}

TEST(OnlineRules, NoRulesNoThread) {
  OnlineRulesOptions o;
  o.runDir = "/nonexistent";
  EXPECT_EQ(startOnlineRules({}, o), nullptr);
  std::unique_ptr<RuleRunner> none;
  stopOnlineRules(none);  // no-op
}

TEST(OnlineRules, BadRuleIsAConfigError) {
  OnlineRulesOptions o;
  o.runDir = fs::temp_directory_path().string();
  EXPECT_THROW(startOnlineRules({RuleSpec{"NoSuchRule"}}, o), strata::ConfigError);
  EXPECT_THROW(startOnlineRules({RuleSpec{"LossNotDecreasing", {{"num_stepz", 2}}}}, o), strata::ConfigError);
}

}  // namespace
}  // namespace strata::rules
