// The in-process rule engine: the debugger hook's tap gives the engine exactly what the files
// hold (the trial reader is the reference), its verdicts equal `strata rules` on the files,
// StopTraining carries the step, and the pure decisions (who evaluates, how much is kept,
// the stop key) hold their tables.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include "debugger/debugger_testing.h"
#include "debugger/hook.h"
#include "rules/online_engine.h"
#include "rules/run.h"
#include "rules/sources/file_sources.h"
#include "rules/step_feed.h"
#include "rules/rules_test_util.h"
#include "runtime/online_rules.h"
#include "runtime/stop.h"

namespace strata::rules::testing {
namespace {

using json = nlohmann::json;
using debugger::DType;
using debugger::Hook;

// Collections that exercise every path of the writer: raw values (float32, bfloat16, int8),
// reductions only (weights), both (gradients), scalars, a due step without tensors.
constexpr char kCollections[] = R"({"collections": [
  {"name": "losses", "save_interval": 2},
  {"name": "weights", "save_interval": 2, "reductions": ["l2", "mean", "abs_max"]},
  {"name": "gradients", "save_interval": 3, "reductions": ["abs_mean"], "save_raw_tensor": true},
  {"name": "acts", "include_regex": ["relu"], "save_interval": 5}]})";

uint16_t bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}

// One training step's worth of saves, with values depending on the step.
void saveStep(Hook& hook, int step, double loss) {
  if (!hook.beginStep(debugger::Mode::kTrain)) {
    hook.saveScalar("lr", 0.1 / (step + 1));  // a scalar on a step that is not due
    return;
  }
  const std::vector<float> w = {1.0f + static_cast<float>(step), -2.0f, 0.5f};
  hook.saveTensor("Net_fc.weight", DType::kFloat32, {3}, w.data());
  const std::vector<float> g = {0.01f * static_cast<float>(step), -0.02f};
  hook.saveTensor("gradient/Net_fc.weight", DType::kFloat32, {2}, g.data());
  const std::vector<uint16_t> relu = {bf16(0.0f), bf16(1.5f), bf16(static_cast<float>(step))};
  hook.saveTensor("relu1_output_0", DType::kBFloat16, {3}, relu.data());
  const std::vector<int8_t> labels = {1, 2, static_cast<int8_t>(step % 3)};
  hook.saveTensor("relu_labels", DType::kInt8, {3}, labels.data());
  const std::vector<double> constant = {1, 1, 1};
  hook.saveTensor("relu_const", DType::kFloat64, {3}, constant.data());
  const float l = static_cast<float>(loss);
  hook.saveTensor("Loss_output_0", DType::kFloat32, {}, &l);
  hook.saveScalar("accuracy", 0.5 + step * 0.01);
}

TEST(InProcessRules, TheTapGivesWhatTheFilesHold) {
  debugger::testing::TempDir dir;
  auto feed = std::make_shared<StepFeed>();
  debugger::setStepTap(feed);
  {
    Hook hook(debugger::testing::debuggerConfig(kCollections), debugger::testing::hookOptions(dir.path()));
    for (int s = 0; s < 12; ++s) saveStep(hook, s, 2.0 - 0.1 * s);
    hook.close(/*writeEndMarker=*/true);
  }
  debugger::setStepTap(nullptr);
  OnlineTrial online(100);
  feed->drainInto(online, 0);
  online.setFinished();
  auto files = makeTrialSource(dir.path());
  ASSERT_NE(files, nullptr);
  const Trial& ref = files->trial();
  ASSERT_EQ(online.steps().size(), ref.steps().size());
  for (size_t i = 0; i < ref.steps().size(); ++i) {
    EXPECT_EQ(online.steps()[i].step, ref.steps()[i].step);
    EXPECT_EQ(online.steps()[i].mode, ref.steps()[i].mode);
    EXPECT_EQ(online.steps()[i].modeStep, ref.steps()[i].modeStep);
  }
  EXPECT_EQ(online.tensorNames(), ref.tensorNames());
  const auto onlineCollections = online.collections();  // by value: one copy for begin and end
  const auto refCollections = ref.collections();
  EXPECT_EQ(std::set<std::string>(onlineCollections.begin(), onlineCollections.end()),
            std::set<std::string>(refCollections.begin(), refCollections.end()));
  for (const std::string& c : ref.collections()) EXPECT_EQ(online.tensorNames(c), ref.tensorNames(c)) << c;
  size_t compared = 0;
  for (const StepInfo& s : ref.steps())
    for (const std::string& name : ref.tensorNames()) {
      ASSERT_EQ(online.hasTensor(name, s.step), ref.hasTensor(name, s.step)) << name << " @" << s.step;
      const auto a = online.value(name, s.step), b = ref.value(name, s.step);
      ASSERT_EQ(a.has_value(), b.has_value()) << name << " @" << s.step;
      if (a) {
        EXPECT_EQ(a->shape, b->shape) << name;
        EXPECT_EQ(a->data, b->data) << name << " @" << s.step;
        ++compared;
      }
      for (const char* op : {"l2", "mean", "max"})
        for (bool abs : {false, true}) {
          const auto ra = online.reduction(name, s.step, op, abs), rb = ref.reduction(name, s.step, op, abs);
          ASSERT_EQ(ra.has_value(), rb.has_value()) << name << " " << op << abs << " @" << s.step;
          if (ra) {
            EXPECT_EQ(*ra, *rb) << name << " " << op;
          }
        }
    }
  EXPECT_GT(compared, 30u);
  const StepFeed::Stats st = feed->stats();
  EXPECT_EQ(st.lateItems, 0u);
  EXPECT_EQ(st.droppedTensors, 0u);
}

// What a run's in-process findings were: (rule, step) -> subjects.
using Verdicts = std::map<std::pair<std::string, int64_t>, std::set<std::string>>;

Verdicts fromFindings(const std::vector<Finding>& findings) {
  Verdicts v;
  for (const Finding& f : findings) v[{f.rule, f.step}].insert(f.subjects.begin(), f.subjects.end());
  return v;
}

Verdicts fromJsonl(const std::string& path) {
  Verdicts v;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    const std::pair<std::string, int64_t> key{j["rule"].get<std::string>(), j["step"].get<int64_t>()};
    for (const auto& s : j["subjects"]) v[key].insert(s.get<std::string>());
  }
  return v;
}

// The findings of `strata rules RUN_DIR` on the files (its StopTraining is reset after).
std::vector<Finding> offlineFindings(const std::string& runDir, const std::vector<RuleSpec>& rules) {
  EngineOptions eo;
  eo.runDir = runDir;
  auto offline = makeRunEngine(runDir, rules, eo, FileSourceOptions{});
  std::vector<Finding> all = offline->poll();
  for (auto& f : offline->finish()) all.push_back(f);
  StopSignal::global().reset();
  return all;
}

const std::vector<RuleSpec> kRules = {
    {"LossNotDecreasing", {{"num_steps", 2}}, json::array({"StopTraining"})},
    {"ExplodingTensor", json::object(), json::array({"log"})},
    {"UnchangedTensor", {{"collection_names", "acts"}, {"num_steps", 3}}},
    {"WeightUpdateRatio", {{"large_threshold", 0.3}}},
    {"VanishingGradient", {{"threshold", 0.05}}},
    {"ProfilerReport"},  // a profiler rule: not run in process
};

TEST(InProcessRules, VerdictsEqualStrataRulesOnTheFiles) {
  debugger::testing::TempDir dir;
  StopSignal::global().reset();
  const std::vector<RuleSpec> specs = inProcessSpecs(kRules, false);
  ASSERT_EQ(specs.size(), kRules.size() - 1);
  OnlineEngineOptions o;
  o.runDir = dir.path();
  o.tickInterval = std::chrono::milliseconds(20);
  OnlineEngine engine(specs, o);
  debugger::setStepTap(engine.feed());
  {
    Hook hook(debugger::testing::debuggerConfig(kCollections), debugger::testing::hookOptions(dir.path()));
    // The loss falls, then rises from step 14 on, and is NaN at step 20.
    for (int s = 0; s < 24; ++s) {
      const double loss = s == 20 ? std::numeric_limits<double>::quiet_NaN() : s < 14 ? 3.0 - 0.1 * s : 1.0 + 0.2 * s;
      saveStep(hook, s, loss);
      runtime::stepDataComplete();  // what should_stop() does at each step boundary
    }
    hook.close(true);
  }
  debugger::setStepTap(nullptr);
  engine.stop();
  // StopTraining: the first LossNotDecreasing finding, with its step.
  ASSERT_TRUE(StopSignal::global().requested());
  EXPECT_EQ(StopSignal::global().rule(), "LossNotDecreasing");
  const int64_t stopStep = StopSignal::global().step();
  StopSignal::global().reset();
  const std::vector<Finding> all = offlineFindings(dir.path(), kRules);
  Verdicts want;
  for (const auto& [key, subjects] : fromFindings(all))
    if (key.second >= 0) want[key] = subjects;  // tensor findings (profiler ones have no step)
  const Verdicts got = fromJsonl(dir.path() + "/rule-output/online/worker_0.jsonl");
  EXPECT_EQ(got, want);
  EXPECT_TRUE(want.count({"LossNotDecreasing", stopStep})) << stopStep;
  EXPECT_TRUE(want.count({"ExplodingTensor", 20}));
  EXPECT_FALSE(want.empty());
  std::set<std::string> rulesSeen;
  for (const auto& kv : want) rulesSeen.insert(kv.first.first);
  EXPECT_GE(rulesSeen.size(), 4u) << "the case should exercise several rules";
  // The stats file.
  std::ifstream in(dir.path() + "/rule-output/online/worker_0.json");
  const json stats = json::parse(in);
  EXPECT_EQ(stats["steps_evaluated"], 24);  // every step: due (even) or with a scalar (odd)
  EXPECT_EQ(stats["findings"].get<int64_t>(), static_cast<int64_t>(got.size()));
  // The first evaluation's one-time cost is split out: total = first + later steps x steady.
  const int64_t firstSteps = stats["first_evaluation_steps"].get<int64_t>();
  ASSERT_GE(firstSteps, 1);
  EXPECT_NEAR(stats["engine_cpu_first_evaluation_us"].get<double>() +
                  static_cast<double>(24 - firstSteps) * stats["engine_cpu_per_step_after_first_us"].get<double>(),
              stats["engine_cpu_s"].get<double>() * 1e6, 1e-3);
}

config::JobConfig jobConfig(const std::string& json) { return config::parseJobConfig(json, "test"); }

constexpr char kPipeline[] =
    R"({"modelparallel": {"enabled": true, "partitions": 2}, "debugger": {"include_workers": "all"}})";

// A 2-stage pipeline's debugger data, one hook per stage as each rank has it: stage 0
// (worker_0) saves no loss, only a loss average every 5 steps (as the example's
// train_loss_avg200, on every rank), rising; stage 1 (worker_1) saves the loss at every step
// (falling, then rising from step 16) and the same average. Offline, the losses collection
// holds Loss_output_0, so LossNotDecreasing never looks at the average; stage 0's engine must
// not either (before the fix it reported the average rising: one verdict more than offline).
TEST(InProcessRules, PipelineStagesVerdictsEqualStrataRulesOnTheFiles) {
  const char* section = R"({"include_workers": "all", "collections": [{"name": "losses", "save_interval": 1}]})";
  const std::vector<RuleSpec> rules = {{"LossNotDecreasing", {{"num_steps", 4}}}};
  StopSignal::global().reset();
  auto runStage = [&](const std::string& runDir, int rank, std::vector<std::string> filledElsewhere) {
    OnlineEngineOptions o;
    o.runDir = runDir;
    o.worker = "worker_" + std::to_string(rank);
    o.tickInterval = std::chrono::milliseconds(20);
    o.collectionsFilledElsewhere = std::move(filledElsewhere);
    OnlineEngine engine(inProcessSpecs(rules, false), o);
    debugger::setStepTap(engine.feed());
    {
      Hook hook(debugger::testing::debuggerConfig(section), debugger::testing::hookOptions(runDir, rank, 2));
      for (int s = 0; s < 30; ++s) {
        hook.beginStep(debugger::Mode::kTrain);
        if (rank == 1) {
          const float loss = s < 16 ? 2.0f - 0.05f * static_cast<float>(s) : 1.0f + 0.1f * static_cast<float>(s);
          hook.saveTensor("Loss_output_0", DType::kFloat32, {}, &loss);
        }
        if (s % 5 == 4) hook.saveScalar("train_loss_avg", 1.0 + 0.1 * s);
        runtime::stepDataComplete();
      }
      hook.close(/*writeEndMarker=*/rank == 1);
    }
    debugger::setStepTap(nullptr);
    engine.stop();
    return fromJsonl(runDir + "/rule-output/online/" + o.worker + ".jsonl");
  };
  debugger::testing::TempDir dir, unfixed;
  const Verdicts stage0 = runStage(dir.path(), 0, runtime::collectionsFilledElsewhere(0, 2, jobConfig(kPipeline)));
  const Verdicts stage1 = runStage(dir.path(), 1, runtime::collectionsFilledElsewhere(1, 2, jobConfig(kPipeline)));
  const Verdicts stage0Alone = runStage(unfixed.path(), 0, {});
  StopSignal::global().reset();
  const Verdicts want = fromFindings(offlineFindings(dir.path(), rules));
  Verdicts got = stage0;
  got.insert(stage1.begin(), stage1.end());
  EXPECT_EQ(got, want);
  EXPECT_TRUE(stage0.empty());
  ASSERT_FALSE(want.empty());  // the loss rises: offline finds it, on Loss_output_0 only
  for (const auto& kv : want) EXPECT_EQ(kv.second, std::set<std::string>{"Loss_output_0"});
  // Without knowing that the last stage holds the losses, stage 0 judges the average.
  ASSERT_FALSE(stage0Alone.empty());
  EXPECT_EQ(stage0Alone.begin()->second, std::set<std::string>{"scalar/train_loss_avg"});
}

TEST(InProcessRules, InProcessSpecsKeepTensorRulesAndOnlyStopTraining) {
  const auto specs = inProcessSpecs(kRules, false);
  for (const RuleSpec& s : specs) {
    EXPECT_NE(s.name, "ProfilerReport");
    for (const auto& a : s.actions) EXPECT_EQ(a, "StopTraining") << s.name;
  }
  EXPECT_EQ(specs[0].actions, json::array({"StopTraining"}));
  EXPECT_TRUE(specs[1].actions.empty());  // ExplodingTensor's "log" stays with the file engine
  EXPECT_TRUE(inProcessSpecs({RuleSpec{"StepOutlier"}, RuleSpec{"LoadBalancing"}}, false).empty());
}

TEST(InProcessRules, RetainedStepsTable) {
  const struct {
    std::vector<RuleSpec> specs;
    size_t want;
  } cases[] = {
      {{}, 2},
      {{RuleSpec{"LossNotDecreasing", {{"num_steps", 500}}}}, 2},  // keeps its own history
      {{RuleSpec{"UnchangedTensor"}}, 3},
      {{RuleSpec{"UnchangedTensor", {{"num_steps", "7"}}}}, 7},
      {{RuleSpec{"WeightUpdateRatio"}}, 2},
      {{RuleSpec{"WeightUpdateRatio", {{"num_steps", 10}}}}, 11},
      {{RuleSpec{"WeightUpdateRatio", {{"num_steps", 100000}}}}, kMaxRetainedSteps},
      {{RuleSpec{"MyRule", json::object(), json::array(), "/lib/x.so"}}, 4},
  };
  for (size_t i = 0; i < std::size(cases); ++i) EXPECT_EQ(retainedStepsFor(cases[i].specs), cases[i].want) << i;
}

TEST(InProcessRules, OnlineTrialKeepsTheNewestStepsOfEachTensor) {
  OnlineTrial t(3);
  for (int s = 0; s < 10; ++s) {
    t.addStep(StepInfo{s, Mode::kTrain, s});
    t.addValue(s, "w", TensorValue{{1}, {double(s)}});
    if (s % 4 == 0) t.addValue(s, "rare", TensorValue{{1}, {double(s)}});
    t.evict();
  }
  EXPECT_FALSE(t.value("w", 6).has_value());
  EXPECT_TRUE(t.value("w", 7).has_value());
  EXPECT_TRUE(t.value("rare", 0).has_value());  // its own newest 3: 0, 4, 8
  std::vector<int64_t> steps;
  for (const StepInfo& s : t.steps()) steps.push_back(s.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 4, 7, 8, 9}));
  EXPECT_TRUE(t.hasMode(Mode::kTrain));
  EXPECT_FALSE(t.hasMode(Mode::kEval));
  EXPECT_EQ(t.stepsAfter(7).size(), 2u);
  EXPECT_EQ(t.tensorNames(), (std::vector<std::string>{"rare", "w"}));
}


TEST(InProcessRules, WhichRankEvaluatesItsTensors) {
  const std::string all = R"("debugger": {"include_workers": "all", "collections": [{"name": "losses"}]})";
  const std::string one = R"("debugger": {"collections": [{"name": "losses"}]})";
  auto mp = [](int partitions, const char* placement) {
    return std::string(R"("modelparallel": {"enabled": true, "partitions": )") + std::to_string(partitions) +
           R"(, "placement_strategy": ")" + placement + "\"}";
  };
  const struct {
    std::string config;
    int worldSize;
    std::vector<int> evaluating;
  } cases[] = {
      {"{}", 2, {}},                                     // no debugger
      {"{" + one + "}", 4, {0}},                          // include_workers one: rank 0 writes
      {"{" + all + "}", 4, {0}},                          // data parallel: rank 0 is read first
      {"{" + all + "," + mp(2, "cluster") + "}", 2, {0, 1}},  // pipeline: each stage its own
      {"{" + all + "," + mp(2, "cluster") + "}", 4, {0, 1}},  // 2 stages x 2: first replicas
      {"{" + all + "," + mp(2, "spread") + "}", 4, {0, 2}},
      // 12 ranks, stage 1's replicas 1, 3, 5, 7, 9, 11: "worker_1" sorts first; stage 0's
      // 0, 2, ..., 10: "worker_0".
      {"{" + all + "," + mp(2, "cluster") + "}", 12, {0, 1}},
      // 12 ranks spread: stage 1 = ranks 6..11, and "worker_10" sorts before "worker_6".
      {"{" + all + "," + mp(2, "spread") + "}", 12, {0, 10}},
  };
  for (const auto& c : cases) {
    const config::JobConfig cfg = jobConfig(c.config);
    std::vector<int> got;
    for (int r = 0; r < c.worldSize; ++r)
      if (runtime::evaluatesOwnTensors(r, c.worldSize, cfg)) got.push_back(r);
    EXPECT_EQ(got, c.evaluating) << c.config << " x" << c.worldSize;
  }
}

TEST(InProcessRules, WhichCollectionsOtherRanksFill) {
  auto mp = [](int partitions, const char* placement) {
    return std::string(R"({"modelparallel": {"enabled": true, "partitions": )") + std::to_string(partitions) +
           R"(, "placement_strategy": ")" + placement + "\"}}";
  };
  const std::vector<std::string> losses = {"losses"}, none;
  const struct {
    std::string config;
    int worldSize;
    std::vector<std::vector<std::string>> byRank;
  } cases[] = {
      {"{}", 2, {none, none}},                                          // data parallel: rank 0 has the loss
      {mp(2, "cluster"), 2, {losses, none}},                            // the last stage has it
      {mp(2, "cluster"), 4, {losses, none, losses, none}},              // pipelines 0-1 and 2-3
      {mp(2, "spread"), 4, {losses, losses, none, none}},               // pipelines 0-2 and 1-3
      {mp(4, "cluster"), 4, {losses, losses, losses, none}},
  };
  for (const auto& c : cases)
    for (int r = 0; r < c.worldSize; ++r)
      EXPECT_EQ(runtime::collectionsFilledElsewhere(r, c.worldSize, jobConfig(c.config)), c.byRank[r])
          << c.config << " rank " << r << " of " << c.worldSize;
}

TEST(InProcessRules, StopKeyOrdersByStepThenRank) {
  const struct {
    int64_t step;
    int rank;
  } cases[] = {{0, 0}, {0, 7}, {12, 1}, {12, 3}, {1000000, 1048575}, {int64_t{1} << 40, 5}};
  int64_t previous = std::numeric_limits<int64_t>::max();
  for (const auto& c : cases) {
    const int64_t key = runtime::encodeRuleKey(c.step, c.rank);
    int64_t step = -1;
    int rank = -1;
    ASSERT_TRUE(runtime::decodeRuleKey(key, &step, &rank));
    EXPECT_EQ(step, c.step);
    EXPECT_EQ(rank, c.rank);
    EXPECT_LT(key, previous) << "later (step, rank) must give a smaller key (the allreduce takes the max)";
    EXPECT_GT(key, runtime::kNoRuleKey);
    previous = key;
  }
  int64_t s;
  int r;
  EXPECT_FALSE(runtime::decodeRuleKey(runtime::kNoRuleKey, &s, &r));
}

}  // namespace
}  // namespace strata::rules::testing
