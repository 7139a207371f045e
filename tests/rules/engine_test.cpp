// The engine: windows (default and compat), statuses, errors, outputs, actions, custom rules
// (registered and from a shared library), the online runner.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "rules/runner.h"
#include "rules_test_util.h"

namespace strata::rules::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Records what it is given.
class WindowProbe final : public Rule {
 public:
  struct Seen {
    int64_t index, startUs, samples, events;
    bool last;
  };
  explicit WindowProbe(std::vector<Seen>* seen, std::string name = "WindowProbe") : seen_(seen), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  Input input() const override { return Input::kMetrics; }
  std::vector<Finding> invokeForWindow(const MetricWindow& w) override {
    seen_->push_back({w.index, w.startUs, int64_t(w.samples->size()), int64_t(w.events->size()), w.last});
    return {};
  }

 private:
  std::vector<Seen>* seen_;
  std::string name_;
};

std::unique_ptr<VectorMetricSource> boundaryStream() {
  auto src = std::make_unique<VectorMetricSource>();
  // Samples at 0, 30, 60 (a window boundary), 90, 120 and 150 s; an event across 60 s.
  for (int s = 0; s <= 150; s += 30) src->push(makeSample(kT0 + s * kSec, "algo-1", "CPUUtilization", "cpu0", 1));
  src->push(event(0, "Forward", "fc", kT0 + 50 * kSec, 20 * kSec));
  src->finish();
  return src;
}

// The windows a probe is given when the engine (compat or not) reads `src` to its end.
std::vector<WindowProbe::Seen> windowsOf(std::unique_ptr<VectorMetricSource> src, bool compat) {
  std::vector<WindowProbe::Seen> seen;
  EngineOptions opts;
  opts.compat = compat;
  Engine engine(opts);
  engine.addRule(std::make_unique<WindowProbe>(&seen));
  engine.setMetricSource(std::move(src));
  engine.finish();
  return seen;
}

TEST(EngineWindows, DefaultCountsEachSampleOnceAndAnalysesTheLastWindow) {
  const auto seen = windowsOf(boundaryStream(), /*compat=*/false);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].samples, 2);  // 0, 30
  EXPECT_EQ(seen[1].samples, 2);  // 60, 90
  EXPECT_EQ(seen[2].samples, 2);  // 120, 150: the last, partial window
  EXPECT_EQ(seen[0].events + seen[1].events + seen[2].events, 1);
  EXPECT_TRUE(seen[2].last);
  EXPECT_EQ(seen[1].startUs, kT0 + 60 * kSec);
}

TEST(EngineWindows, CompatIsInclusiveAndDropsTheLastMinute) {
  const auto seen = windowsOf(boundaryStream(), /*compat=*/true);
  // Latest file minute is 120 s: windows starting at 0 and 60 only.
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].samples, 3);  // 0, 30 and 60 (inclusive end)
  EXPECT_EQ(seen[1].samples, 3);  // 60, 90, 120
  EXPECT_EQ(seen[0].events, 1);   // the event overlaps both windows
  EXPECT_EQ(seen[1].events, 1);
}

TEST(EngineWindows, CompatOriginIsTheFirstFileStamp) {
  auto src = boundaryStream();
  src->setFileStamps(kT0 - 10 * kSec, kT0 + 600 * kSec);
  const auto seen = windowsOf(std::move(src), /*compat=*/true);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen[0].startUs, kT0 - 10 * kSec);
}

TEST(EngineWindows, OnlineWindowsCloseAsTheWatermarkPasses) {
  std::vector<WindowProbe::Seen> seen;
  Engine engine;
  engine.addRule(std::make_unique<WindowProbe>(&seen));
  auto src = std::make_unique<VectorMetricSource>();
  VectorMetricSource* raw = src.get();
  engine.setMetricSource(std::move(src));
  raw->push(makeSample(kT0, "algo-1", "CPUUtilization", "cpu0", 1));
  raw->push(makeSample(kT0 + 59 * kSec, "algo-1", "CPUUtilization", "cpu0", 1));
  engine.poll();
  EXPECT_TRUE(seen.empty());  // the first window is still open
  raw->push(makeSample(kT0 + 61 * kSec, "algo-1", "CPUUtilization", "cpu0", 1));
  engine.poll();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].samples, 2);
  EXPECT_FALSE(seen[0].last);
  raw->finish();
  engine.finish();
  EXPECT_EQ(seen.size(), 2u);
}

class Thrower final : public Rule {
 public:
  std::string name() const override { return "Thrower"; }
  Input input() const override { return Input::kTensors; }
  std::vector<Finding> invokeAtStep(const Trial&, const StepInfo& s) override {
    if (s.step == 1) throw std::runtime_error("tensor has the wrong shape");
    return {};
  }
};

TEST(EngineStatus, LifecycleAndErrors) {
  Engine engine;
  engine.addRule(std::make_unique<Thrower>());
  engine.addRules({RuleSpec{"ExplodingTensor"}, RuleSpec{"VanishingGradient"}});
  auto src = std::make_unique<MemoryTensorSource>();
  src->mutableTrial().add(0, "w", {{1}, {1.0}});
  src->mutableTrial().add(1, "w", {{1}, {std::nan("")}});
  src->mutableTrial().add(2, "w", {{1}, {1.0}});
  engine.setTensorSource(std::move(src));
  engine.poll();
  for (const auto& s : engine.summary()) {
    if (s.name == "Thrower") {
      EXPECT_EQ(s.status, RuleStatus::kError);
      EXPECT_NE(s.reason.find("wrong shape"), std::string::npos);
      EXPECT_NE(s.reason.find("step 1"), std::string::npos);
    } else {
      EXPECT_EQ(s.status, RuleStatus::kInProgress) << s.name;
    }
  }
  engine.finish();
  for (const auto& s : engine.summary()) {
    if (s.name == "ExplodingTensor") {
      EXPECT_EQ(s.status, RuleStatus::kIssuesFound);
    }
    if (s.name == "VanishingGradient") {
      EXPECT_EQ(s.status, RuleStatus::kNoData);  // no gradients to look at: not "no issues"
      EXPECT_NE(s.reason.find("gradients"), std::string::npos) << s.reason;
    }
  }
}

TEST(EngineOutputs, ReferenceShapedJsonFiles) {
  const fs::path dir = freshTempDir("rules_outputs");
  EngineOptions opts;
  opts.runDir = dir.string();
  Engine engine(opts);
  engine.addRules({RuleSpec{"ExplodingTensor"}, RuleSpec{"ProfilerReport"}});
  auto src = std::make_unique<MemoryTensorSource>();
  src->mutableTrial().add(0, "w", {{1}, {std::nan("")}});
  engine.setTensorSource(std::move(src));
  auto metrics = std::make_unique<VectorMetricSource>();
  addSnapshot(*metrics, kT0, "algo-1", Snapshot{{10}, {50}, {20}, {}});
  metrics->finish();
  engine.setMetricSource(std::move(metrics));
  engine.finish();
  std::ifstream in(dir / "rule-output" / "ExplodingTensor.json");
  ASSERT_TRUE(in.good());
  const json j = json::parse(in);
  for (const char* key : {"RuleTriggered", "Violations", "Details", "Datapoints", "RuleParameters", "Status"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["RuleTriggered"], 1);
  EXPECT_EQ(j["Status"], "IssuesFound");
  EXPECT_TRUE(fs::exists(dir / "rule-output" / "CPUBottleneck.json"));
  EXPECT_TRUE(fs::exists(dir / "rule-output" / "ProfilerReport.json"));
  EXPECT_TRUE(fs::exists(dir / "rule-output" / "summary.json"));
  std::ifstream findings(dir / "rule-output" / "findings.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(findings, line));
  EXPECT_EQ(json::parse(line)["rule"], "ExplodingTensor");
  fs::remove_all(dir);
}

std::unique_ptr<MemoryTensorSource> nanTrial() {
  auto src = std::make_unique<MemoryTensorSource>();
  src->mutableTrial().add(0, "w", {{1}, {1.0}});
  src->mutableTrial().add(7, "w", {{1}, {std::nan("")}});
  return src;
}

TEST(EngineActions, StopTrainingSetsTheSignalAndTheFile) {
  StopSignal::global().reset();
  const fs::path dir = freshTempDir("rules_stop");
  EngineOptions opts;
  opts.runDir = dir.string();
  opts.writeStopFile = true;
  Engine engine(opts);
  engine.addRules({RuleSpec{"ExplodingTensor", json::object(), json::array({"StopTraining", "log"})}});
  engine.setTensorSource(nanTrial());
  EXPECT_FALSE(StopSignal::global().requested());
  engine.poll();
  EXPECT_TRUE(StopSignal::global().requested());
  EXPECT_EQ(StopSignal::global().rule(), "ExplodingTensor");
  EXPECT_TRUE(StopSignal::stopFileExists(dir.string()));
  StopSignal::global().reset();
  EXPECT_FALSE(StopSignal::global().requested());
  fs::remove_all(dir);
}

TEST(EngineActions, CommandGetsTheFindingOnStdin) {
  const fs::path dir = freshTempDir("rules_command");
  const fs::path out = dir / "finding.json";
  Engine engine;
  engine.addRules({RuleSpec{"ExplodingTensor", json::object(),
                            json::array({json{{"command", "cat > '" + out.string() + "'; echo $STRATA_RULE >> '" +
                                                                  out.string() + ".rule'"}}})}});
  engine.setTensorSource(nanTrial());
  engine.poll();
  std::ifstream in(out);
  ASSERT_TRUE(in.good());
  const json f = json::parse(in);
  EXPECT_EQ(f["rule"], "ExplodingTensor");
  EXPECT_EQ(f["step"], 7);
  std::ifstream rule(out.string() + ".rule");
  std::string name;
  rule >> name;
  EXPECT_EQ(name, "ExplodingTensor");
  fs::remove_all(dir);
}

TEST(EngineActions, CommandTimeoutKillsIt) {
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r = runCommand("sleep 30", "{}", std::chrono::milliseconds(300), {});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(r.timedOut);
  EXPECT_LT(s, 5.0);
  const CommandResult ok = runCommand("read x; test \"$x\" = hello", "hello\n", std::chrono::seconds(5), {});
  EXPECT_EQ(ok.exitCode, 0);
  const CommandResult ignoresStdin = runCommand("exit 3", std::string(1 << 20, 'x'), std::chrono::seconds(5), {});
  EXPECT_EQ(ignoresStdin.exitCode, 3);
}

TEST(EngineActions, BadActionsAreConfigErrors) {
  Engine engine;
  EXPECT_THROW(engine.addRules({RuleSpec{"ExplodingTensor", json::object(), json::array({"Email"})}}), ConfigError);
  EXPECT_THROW(engine.addRules({RuleSpec{"ExplodingTensor", json::object(), json::array({json{{"command", ""}}})}}),
               ConfigError);
  EXPECT_THROW(engine.addRules({RuleSpec{"LossNotDecreasing", {{"num_step", 3}}}}), ConfigError);  // typo
  EXPECT_THROW(engine.addRules({RuleSpec{"CPUBottleneck", {{"threshold", "high"}}}}), ConfigError);
}

TEST(RulesFile, ParsesAndValidates) {
  const RulesFile f = parseRulesFile(
      R"({"compat": true, "rules": [{"name": "LossNotDecreasing", "actions": ["StopTraining", {"command": "true"}]},
                                    {"name": "Mine", "library": "/x/libmine.so", "parameters": {"k": 1}}]})",
      "rules.json");
  EXPECT_TRUE(f.compat);
  ASSERT_EQ(f.rules.size(), 2u);
  EXPECT_EQ(f.rules[1].library, "/x/libmine.so");
  EXPECT_THROW(parseRulesFile(R"({"rules": [{"name": "Nope"}]})", "rules.json"), ConfigError);
  EXPECT_THROW(parseRulesFile(R"({"rulez": []})", "rules.json"), ConfigError);
  EXPECT_THROW(parseRulesFile("{", "rules.json"), ConfigError);
}

class LossAbove final : public Rule {
 public:
  explicit LossAbove(double limit) : limit_(limit) {}
  std::string name() const override { return "LossAbove"; }
  Input input() const override { return Input::kTensors; }
  std::vector<Finding> invokeAtStep(const Trial& trial, const StepInfo& s) override {
    auto v = trial.value("loss", s.step);
    if (!v || v->data[0] <= limit_) return {};
    Finding f;
    f.message = "loss above " + std::to_string(limit_);
    f.step = s.step;
    return {f};
  }

 private:
  double limit_;
};

STRATA_REGISTER_RULE("LossAbove", [](const nlohmann::json& p) {
  return std::make_unique<LossAbove>(p.value("limit", 10.0));
});

TEST(CustomRules, RegisteredRuleFromConfig) {
  Engine engine;
  engine.addRules(parseRulesFile(R"({"rules": [{"name": "LossAbove", "parameters": {"limit": 2}}]})", "x").rules);
  auto src = std::make_unique<MemoryTensorSource>();
  src->mutableTrial().addScalar(0, "loss", 1.0);
  src->mutableTrial().addScalar(1, "loss", 3.0);
  engine.setTensorSource(std::move(src));
  const auto findings = engine.finish();
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].rule, "LossAbove");
  EXPECT_EQ(findings[0].step, 1);
  EXPECT_EQ(engine.reportJson("LossAbove")["RuleTriggered"], 1);  // engine-kept counts
  EXPECT_THROW(registerRule("LossAbove", [](const nlohmann::json&) { return std::unique_ptr<Rule>(); }),
               std::invalid_argument);
}

// Builds a rule library with the system compiler; skipped when there is none.
TEST(CustomRules, SharedLibraryPlugin) {
  if (std::system("c++ --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no C++ compiler to build a plugin";
  const fs::path dir = freshTempDir("rules_plugin");
  const fs::path include = fs::path(STRATA_SOURCE_DIR) / "include";
  std::ofstream(dir / "plugin.cpp") << R"(
#include <strata/rules.h>
#include <memory>
namespace {
class Always final : public strata::rules::Rule {
 public:
  explicit Always(double v) : v_(v) {}
  std::string name() const override { return "PluginRule"; }
  Input input() const override { return Input::kTensors; }
  std::vector<strata::rules::Finding> invokeAtStep(const strata::rules::Trial&, const strata::rules::StepInfo& s) override {
    strata::rules::Finding f;
    f.message = "plugin " + std::to_string(v_);
    f.step = s.step;
    return {f};
  }
 private:
  double v_;
};
std::unique_ptr<strata::rules::Rule> make(const std::string& name, const nlohmann::json& p) {
  if (name != "PluginRule") throw std::runtime_error("unknown rule " + name);
  return std::make_unique<Always>(p.value("v", 1.0));
}
}  // namespace
STRATA_RULE_PLUGIN(make)
)";
  const std::string cmd = "c++ -std=c++17 -shared -fPIC -O0 -I'" + include.string() + "' '" + (dir / "plugin.cpp").string() +
                          "' -o '" + (dir / "libplugin.so").string() + "' 2> '" + (dir / "build.log").string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "plugin build failed, see " << (dir / "build.log");
  Engine engine;
  engine.addRules({RuleSpec{"PluginRule", {{"v", 4}}, json::array(), (dir / "libplugin.so").string()}});
  auto src = std::make_unique<MemoryTensorSource>();
  src->mutableTrial().addScalar(5, "loss", 1.0);
  engine.setTensorSource(std::move(src));
  const auto findings = engine.finish();
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].message, "plugin 4.000000");
  Engine bad;
  EXPECT_THROW(bad.addRules({RuleSpec{"Other", json::object(), json::array(), (dir / "libplugin.so").string()}}), ConfigError);
  EXPECT_THROW(bad.addRules({RuleSpec{"PluginRule", json::object(), json::array(), (dir / "missing.so").string()}}),
               ConfigError);
  fs::remove_all(dir);
}

TEST(RuleRunner, PollsOnItsThreadAndFinishesOnStop) {
  StopSignal::global().reset();
  const fs::path dir = freshTempDir("rules_runner");
  EngineOptions opts;
  opts.runDir = dir.string();
  auto engine = std::make_unique<Engine>(opts);
  engine->addRules({RuleSpec{"ExplodingTensor", json::object(), json::array({"StopTraining"})}});
  engine->setTensorSource(nanTrial());
  RuleRunner runner(std::move(engine), std::chrono::seconds(60));
  runner.notifyStep(1);
  for (int i = 0; i < 200 && !StopSignal::global().requested(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(StopSignal::global().requested());
  runner.stop();
  bool found = false;
  for (const auto& s : runner.summary())
    if (s.name == "ExplodingTensor") found = s.status == RuleStatus::kIssuesFound;
  EXPECT_TRUE(found);
  EXPECT_TRUE(fs::exists(dir / "rule-output" / "ExplodingTensor.json"));
  StopSignal::global().reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata::rules::testing
