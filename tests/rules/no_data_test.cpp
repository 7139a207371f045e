// "No data" is not "no issues": rules whose inputs never arrived end in status NoData with the
// reason, in rule-output/<Rule>.json, the summary, the exit code of `strata rules` and the
// HTML report; rules that had their data keep NoIssuesFound / IssuesFound.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "rules/report/html_report.h"
#include "rules/run.h"
#include "rules_test_util.h"

namespace strata::rules::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Three minutes of a CPU-only host: CPU, I/O wait and memory samples, no GPU lines.
std::unique_ptr<VectorMetricSource> cpuOnlyHost() {
  auto src = std::make_unique<VectorMetricSource>();
  for (int i = 0; i < 360; ++i) addSnapshot(*src, kT0 + i * 500000, "algo-1", Snapshot{{95, 97}, {}, {}, {60, 60}, 40});
  return src;
}

// The same with one GPU idling: the bottleneck rules have their data.
std::unique_ptr<VectorMetricSource> gpuHost() {
  auto src = std::make_unique<VectorMetricSource>();
  for (int i = 0; i < 360; ++i)
    addSnapshot(*src, kT0 + i * 500000, "algo-1", Snapshot{{95, 97}, {3}, {20}, {60, 60}, 40});
  return src;
}

struct Case {
  const char* rule;
  bool gpu;  // the host has a GPU
  RuleStatus want;
  const char* reasonHas;
};

TEST(NoData, GpuRulesOnACpuOnlyHostSayTheyHadNoData) {
  const Case cases[] = {
      {"LowGPUUtilization", false, RuleStatus::kNoData, "no GPU utilisation samples"},
      {"GPUMemoryIncrease", false, RuleStatus::kNoData, "no GPU memory samples"},
      {"CPUBottleneck", false, RuleStatus::kNoData, "no GPU utilisation samples"},
      {"IOBottleneck", false, RuleStatus::kNoData, "no GPU utilisation samples"},
      {"BatchSize", false, RuleStatus::kNoData, "no GPU"},
      {"LoadBalancing", false, RuleStatus::kNoData, "fewer than two ranks"},
      {"StepOutlier", false, RuleStatus::kNoData, "no step durations"},
      {"Dataloader", false, RuleStatus::kNoData, "no data-loader events"},
      {"OverallFrameworkMetrics", false, RuleStatus::kNoData, "no framework events"},
      // Rules whose data is there.
      {"OverallSystemUsage", false, RuleStatus::kNoIssuesFound, ""},
      {"MaxInitializationTime", false, RuleStatus::kNoIssuesFound, ""},
      {"LowGPUUtilization", true, RuleStatus::kNoIssuesFound, ""},  // 360 samples < patience 1000
      {"CPUBottleneck", true, RuleStatus::kNoIssuesFound, ""},
      {"CPUBottleneck", true, RuleStatus::kIssuesFound, ""},  // with patience 10 (below)
  };
  for (const Case& c : cases) {
    const bool lowPatience = c.want == RuleStatus::kIssuesFound;
    const json params = lowPatience ? json{{"patience", 10}} : json::object();
    const RunResult r = runMetricRule(c.rule, params, c.gpu ? gpuHost() : cpuOnlyHost());
    EXPECT_EQ(r.summary.status, c.want) << c.rule << " gpu=" << c.gpu << ": " << r.summary.reason;
    EXPECT_EQ(r.report["Status"], statusName(c.want)) << c.rule;
    if (c.want == RuleStatus::kNoData) {
      EXPECT_NE(r.summary.reason.find("no data: "), std::string::npos) << c.rule << ": " << r.summary.reason;
      EXPECT_NE(r.summary.reason.find(c.reasonHas), std::string::npos) << c.rule << ": " << r.summary.reason;
      EXPECT_TRUE(r.findings.empty()) << c.rule;
    }
  }
}

TEST(NoData, TensorRulesWithoutTheirCollection) {
  // Only weights were saved: no loss, no gradients.
  MemoryTrial t;
  for (int s = 0; s < 5; ++s) t.add(s, "Net_fc.weight", TensorValue{{2}, {1.0 + s, 2.0}});
  t.setCollection("weights", {"Net_fc.weight"});
  const RunResult loss = runTensorRule("LossNotDecreasing", json::object(), t);
  EXPECT_EQ(loss.summary.status, RuleStatus::kNoData);
  EXPECT_NE(loss.summary.reason.find("a loss tensor"), std::string::npos) << loss.summary.reason;
  const RunResult grad = runTensorRule("VanishingGradient", json::object(), t);
  EXPECT_EQ(grad.summary.status, RuleStatus::kNoData);
  EXPECT_NE(grad.summary.reason.find("gradients"), std::string::npos) << grad.summary.reason;
  // Rules that found their tensors are not NoData.
  EXPECT_EQ(runTensorRule("ExplodingTensor", json::object(), t).summary.status, RuleStatus::kNoIssuesFound);
  EXPECT_EQ(runTensorRule("WeightUpdateRatio", json::object(), t).summary.status, RuleStatus::kNoIssuesFound);
  // Weights saved as reductions only cannot give an update ratio: NoData, saying why.
  MemoryTrial reduced;
  for (int s = 0; s < 5; ++s) reduced.addReduction(s, "Net_fc.weight", "l2", false, 1.0 + s);
  reduced.setCollection("weights", {"Net_fc.weight"});
  const RunResult ratio = runTensorRule("WeightUpdateRatio", json::object(), reduced);
  EXPECT_EQ(ratio.summary.status, RuleStatus::kNoData);
  EXPECT_NE(ratio.summary.reason.find("raw weights"), std::string::npos) << ratio.summary.reason;
}

TEST(NoData, WithoutAnySourceTheRuleSaysWhichIsMissing) {
  Engine engine;
  engine.addRules({RuleSpec{"ExplodingTensor"}, RuleSpec{"StepOutlier"}});
  engine.finish();
  for (const RuleSummary& s : engine.summary()) {
    EXPECT_EQ(s.status, RuleStatus::kNoData) << s.name;
    EXPECT_NE(s.reason.find(s.name == "StepOutlier" ? "no profiler output" : "no debugger output"), std::string::npos)
        << s.name << ": " << s.reason;
  }
}

RuleSummary summaryOf(const std::string& name, RuleStatus status, const std::string& group = "") {
  RuleSummary s;
  s.name = name;
  s.status = status;
  s.group = group;
  return s;
}

TEST(NoData, ExitCodeOfStrataRules) {
  using S = RuleStatus;
  // Table: the statuses of a run -> the exit code.
  const struct {
    std::vector<RuleSummary> rules;
    int code;
  } cases[] = {
      {{summaryOf("LossNotDecreasing", S::kNoIssuesFound)}, 0},
      {{summaryOf("LossNotDecreasing", S::kIssuesFound)}, 0},
      {{summaryOf("LossNotDecreasing", S::kNoData)}, kExitRuleNoData},
      {{summaryOf("LossNotDecreasing", S::kNoData), summaryOf("ExplodingTensor", S::kError)}, kExitRuleError},
      // ProfilerReport on a CPU-only run: GPU sub-rules without data, others with: 0.
      {{summaryOf("LowGPUUtilization", S::kNoData, "ProfilerReport"),
        summaryOf("StepOutlier", S::kNoIssuesFound, "ProfilerReport")},
       0},
      // ... and when none of them had any: NoData.
      {{summaryOf("LowGPUUtilization", S::kNoData, "ProfilerReport"),
        summaryOf("StepOutlier", S::kNoData, "ProfilerReport")},
       kExitRuleNoData},
  };
  for (size_t i = 0; i < std::size(cases); ++i) EXPECT_EQ(runExitCode(cases[i].rules), cases[i].code) << "case " << i;
}

TEST(NoData, ReportAndGroupStatus) {
  const fs::path dir = fs::temp_directory_path() / ("strata_nodata_" + std::to_string(getpid()));
  fs::remove_all(dir);
  EngineOptions opts;
  opts.runDir = dir.string();
  Engine engine(opts);
  engine.addRules({RuleSpec{"ProfilerReport"}, RuleSpec{"LossNotDecreasing"}});
  auto src = cpuOnlyHost();
  src->finish();
  engine.setMetricSource(std::move(src));
  engine.setTensorSource(std::make_unique<MemoryTensorSource>());
  engine.finish();
  std::ifstream in(dir / "rule-output" / "LowGPUUtilization.json");
  const json low = json::parse(in);
  EXPECT_EQ(low["Status"], "NoData");
  EXPECT_NE(low["StatusReason"].get<std::string>().find("CPU-only"), std::string::npos);
  std::ifstream group(dir / "rule-output" / "ProfilerReport.json");
  EXPECT_EQ(json::parse(group)["Status"], "NoIssuesFound");  // OverallSystemUsage had data
  const std::string html = report::renderReport(report::loadReportInput(dir.string()));
  EXPECT_NE(html.find("badge NoData"), std::string::npos);
  EXPECT_NE(html.find("had no data to look at"), std::string::npos);
  EXPECT_NE(html.find("Without data"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata::rules::testing
