// Bottleneck rules on synthetic streams: must and must not fire, at threshold, patience and
// window edges; compat-mode numbers; the reference's bugs fixed by default.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "rules/profiler/metric_rule.h"
#include "rules_test_util.h"

namespace strata::rules::testing {
namespace {

using json = nlohmann::json;

// n snapshots every 500 ms on algo-1: `bottlenecks` of them with gpu0 = lowGpu and cpu0 = highCpu.
std::unique_ptr<VectorMetricSource> bottleneckStream(int n, int bottlenecks, double lowGpu = 5, double highCpu = 95) {
  auto src = std::make_unique<VectorMetricSource>();
  for (int i = 0; i < n; ++i) {
    const bool b = i < bottlenecks;
    addSnapshot(*src, kT0 + i * 500000, "algo-1", Snapshot{{b ? highCpu : 40, 30}, {b ? lowGpu : 80}, {}, {}});
  }
  return src;
}

TEST(CPUBottleneck, FiresAboveThresholdShare) {
  auto r = runMetricRule("CPUBottleneck", {{"patience", 10}}, bottleneckStream(100, 60));
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.report["Violations"], 60);
  EXPECT_EQ(r.report["Datapoints"], 100);
  EXPECT_GE(r.report["RuleTriggered"].get<int>(), 1);
  EXPECT_EQ(r.report["RuleParameters"], "threshold:50\ncpu_threshold:90\ngpu_threshold:10\npatience:10");
  EXPECT_EQ(r.summary.status, RuleStatus::kIssuesFound);
}

TEST(CPUBottleneck, ExactlyAtThresholdShareDoesNotFire) {
  auto r = runMetricRule("CPUBottleneck", {{"patience", 10}}, bottleneckStream(100, 50));  // 50% is not > 50%
  EXPECT_TRUE(r.findings.empty());
  EXPECT_EQ(r.report["Violations"], 50);
  EXPECT_EQ(r.summary.status, RuleStatus::kNoIssuesFound);
}

TEST(CPUBottleneck, PatienceIsStrict) {
  EXPECT_TRUE(runMetricRule("CPUBottleneck", {{"patience", 20}}, bottleneckStream(20, 20)).findings.empty());
  EXPECT_FALSE(runMetricRule("CPUBottleneck", {{"patience", 19}}, bottleneckStream(20, 20)).findings.empty());
}

TEST(CPUBottleneck, ThresholdValuesThemselvesAreNotBottlenecks) {
  // gpu == gpu_threshold is not "low"; cpu == cpu_threshold is not "high".
  EXPECT_EQ(runMetricRule("CPUBottleneck", {{"patience", 0}}, bottleneckStream(50, 50, 10, 95)).report["Violations"], 0);
  EXPECT_EQ(runMetricRule("CPUBottleneck", {{"patience", 0}}, bottleneckStream(50, 50, 5, 90)).report["Violations"], 0);
  EXPECT_EQ(runMetricRule("CPUBottleneck", {{"patience", 0}}, bottleneckStream(50, 50, 9.99, 90.01)).report["Violations"], 50);
}

// Node A's GPU idles while node B's CPU is busy: not a bottleneck of either node. The
// reference ignores the node and pairs them up.
std::unique_ptr<VectorMetricSource> twoNodeStream() {
  auto src = std::make_unique<VectorMetricSource>();
  for (int i = 0; i < 40; ++i) {
    const int64_t t = kT0 + i * 500000;
    addSnapshot(*src, t, "algo-1", Snapshot{{40}, {2}, {}, {}});
    addSnapshot(*src, t, "algo-2", Snapshot{{99}, {90}, {}, {}});
  }
  return src;
}

TEST(CPUBottleneck, DefaultKeepsNodesApartCompatMixesThem) {
  auto fixed = runMetricRule("CPUBottleneck", {{"patience", 5}}, twoNodeStream());
  EXPECT_EQ(fixed.report["Violations"], 0);
  EXPECT_EQ(fixed.report["Datapoints"], 80);  // 40 snapshots per node
  EXPECT_TRUE(fixed.findings.empty());
  auto compat = runMetricRule("CPUBottleneck", {{"patience", 5}}, analysedToTheEnd(twoNodeStream()), /*compat=*/true);
  EXPECT_EQ(compat.report["Violations"], 40);
  EXPECT_EQ(compat.report["Datapoints"], 40);
  EXPECT_FALSE(compat.findings.empty());
}

TEST(CPUBottleneck, FrameworkRatioPairsLabelsAsTheReferenceDoesOnlyInCompat) {
  auto make = [] {
    auto src = bottleneckStream(20, 20);
    // Running during every bottleneck snapshot: CPU ops 100 µs, GPU kernels 300 µs per snapshot.
    for (int i = 0; i < 20; ++i) {
      const int64_t t = kT0 + i * 500000;
      src->push(event(0, "cpu_functions", "aten::add", t - 50, 100));
      src->push(event(0, "gpu_functions-dev:0", "gemm", t - 150, 300));
    }
    return src;
  };
  auto fixed = runMetricRule("CPUBottleneck", {{"patience", 0}}, make());
  EXPECT_NEAR(fixed.report["Details"]["ratio"]["cpu_functions"].get<double>(), 25.0, 1e-9);
  EXPECT_NEAR(fixed.report["Details"]["ratio"]["gpu_functions-dev:0"].get<double>(), 75.0, 1e-9);
  auto compat = runMetricRule("CPUBottleneck", {{"patience", 0}}, analysedToTheEnd(make()), true);
  // utils.py: labels CPU-first, totals GPU-first.
  EXPECT_NEAR(compat.report["Details"]["ratio"]["cpu_functions"].get<double>(), 75.0, 1e-9);
}

TEST(IOBottleneck, FiresOnIoWaitNotCpu) {
  auto src = std::make_unique<VectorMetricSource>();
  for (int i = 0; i < 30; ++i) addSnapshot(*src, kT0 + i * 500000, "algo-1", Snapshot{{99}, {1}, {}, {70}});
  auto r = runMetricRule("IOBottleneck", {{"patience", 10}, {"io_threshold", 60}}, std::move(src));
  EXPECT_EQ(r.report["Violations"], 30);
  EXPECT_FALSE(r.findings.empty());
  EXPECT_EQ(r.report["RuleParameters"], "threshold:50\nio_threshold:60\ngpu_threshold:10\npatience:10");
  auto quiet = std::make_unique<VectorMetricSource>();
  for (int i = 0; i < 30; ++i) addSnapshot(*quiet, kT0 + i * 500000, "algo-1", Snapshot{{99}, {1}, {}, {60}});
  EXPECT_TRUE(runMetricRule("IOBottleneck", {{"patience", 10}, {"io_threshold", 60}}, std::move(quiet)).findings.empty());
}

std::unique_ptr<VectorMetricSource> gpuStream(const std::vector<double>& values) {
  auto src = std::make_unique<VectorMetricSource>();
  for (size_t i = 0; i < values.size(); ++i) addSnapshot(*src, kT0 + int64_t(i) * 500000, "algo-1", Snapshot{{}, {values[i]}, {}, {}});
  return src;
}

TEST(LowGPUUtilization, UnderutilisedAfterPatience) {
  const json p = {{"window", 10}, {"patience", 20}};
  EXPECT_FALSE(runMetricRule("LowGPUUtilization", p, gpuStream(std::vector<double>(21, 50))).findings.empty());
  EXPECT_TRUE(runMetricRule("LowGPUUtilization", p, gpuStream(std::vector<double>(20, 50))).findings.empty());
  EXPECT_TRUE(runMetricRule("LowGPUUtilization", p, gpuStream(std::vector<double>(40, 90))).findings.empty());
  // p95 exactly at the threshold: neither underutilised nor fluctuating.
  EXPECT_TRUE(runMetricRule("LowGPUUtilization", p, gpuStream(std::vector<double>(40, 70))).findings.empty());
}

TEST(LowGPUUtilization, FluctuatingAndTheWindowCountsSamples) {
  std::vector<double> v;
  for (int i = 0; i < 40; ++i) v.push_back(i % 2 ? 100 : 0);
  auto r = runMetricRule("LowGPUUtilization", {{"window", 10}, {"patience", 20}}, gpuStream(v));
  ASSERT_FALSE(r.findings.empty());
  EXPECT_NE(r.findings[0].message.find("fluctuating"), std::string::npos);
  EXPECT_DOUBLE_EQ(r.report["Details"]["algo-1"]["gpu0"]["gpu_max"].get<double>(), 100);
  // The window holds the last 10 samples: 30 low then 10 busy ones is healthy.
  std::vector<double> recovered(30, 5);
  recovered.insert(recovered.end(), 10, 95);
  EXPECT_TRUE(runMetricRule("LowGPUUtilization", {{"window", 10}, {"patience", 20}}, gpuStream(recovered)).findings.empty());
}

std::unique_ptr<VectorMetricSource> memStream(const std::vector<double>& values) {
  auto src = std::make_unique<VectorMetricSource>();
  for (size_t i = 0; i < values.size(); ++i)
    addSnapshot(*src, kT0 + int64_t(i) * 500000, "algo-1", Snapshot{{}, {}, {values[i]}, {}});
  return src;
}

std::vector<double> jump(double from, double to, int each = 10) {
  std::vector<double> v(each, from);
  v.insert(v.end(), each, to);
  return v;
}

TEST(GPUMemoryIncrease, DefaultComparesConsecutiveWindows) {
  const json p = {{"patience", 0}};
  EXPECT_FALSE(runMetricRule("GPUMemoryIncrease", p, memStream(jump(20, 26))).findings.empty());
  EXPECT_TRUE(runMetricRule("GPUMemoryIncrease", p, memStream(jump(20, 25))).findings.empty());  // 5 is not > 5
  EXPECT_TRUE(runMetricRule("GPUMemoryIncrease", {{"patience", 20}}, memStream(jump(20, 26))).findings.empty());
}

TEST(GPUMemoryIncrease, CompatReproducesTheReferenceSlice) {
  // values 1..12: mean(values[-10:]) = 7.5, mean(values[-11:-2]) = mean(2..10) = 6 -> 1.5.
  std::vector<double> v;
  for (int i = 1; i <= 12; ++i) v.push_back(i);
  auto r = runMetricRule("GPUMemoryIncrease", {{"patience", 0}, {"increase", 0}}, analysedToTheEnd(memStream(v)), true);
  EXPECT_EQ(r.report["Violations"], 1);  // only at the 12th value (len > window + 1)
  EXPECT_DOUBLE_EQ(r.report["Details"]["algo-1"]["gpu0"]["increase"].get<double>(), 1.5);
  // A jump J is seen as at most 2J/window: 20 points (4) does not fire, 30 (6) does.
  EXPECT_TRUE(runMetricRule("GPUMemoryIncrease", {{"patience", 0}}, analysedToTheEnd(memStream(jump(20, 40))), true).findings.empty());
  EXPECT_FALSE(runMetricRule("GPUMemoryIncrease", {{"patience", 0}}, analysedToTheEnd(memStream(jump(20, 50))), true).findings.empty());
  // The default mode sees the 20-point jump the reference misses.
  EXPECT_FALSE(runMetricRule("GPUMemoryIncrease", {{"patience", 0}}, memStream(jump(20, 40))).findings.empty());
}

std::unique_ptr<VectorMetricSource> batchStream(int n, double cpu, double gpu, bool spreadMem = false) {
  auto src = std::make_unique<VectorMetricSource>();
  for (int i = 0; i < n; ++i)
    addSnapshot(*src, kT0 + i * 500000, "algo-1", Snapshot{{cpu, cpu}, {gpu}, {spreadMem ? 10.0 + i % 20 : 30.0}, {}});
  return src;
}

TEST(BatchSize, FiresWhenEverythingIsLow) {
  const json p = {{"window", 10}, {"patience", 10}};
  auto r = runMetricRule("BatchSize", p, batchStream(20, 20, 30));
  EXPECT_FALSE(r.findings.empty());
  EXPECT_EQ(r.report["RuleParameters"],
            "cpu_threshold_p95:70\ngpu_threshold_p95:70\ngpu_memory_threshold_p95:70\npatience:10\nwindow:10");
  EXPECT_TRUE(runMetricRule("BatchSize", p, batchStream(20, 20, 80)).findings.empty());
  EXPECT_TRUE(runMetricRule("BatchSize", p, batchStream(20, 75, 30)).findings.empty());
  EXPECT_TRUE(runMetricRule("BatchSize", p, batchStream(10, 20, 30)).findings.empty());  // not > window
}

TEST(BatchSize, CompatKeepsTheMemoryIqrBug) {
  // GPU util constant 30 (p25 30); memory 10..29: p25 14.75, p75 24.25.
  const json p = {{"window", 10}, {"patience", 10}};
  auto fixed = runMetricRule("BatchSize", p, batchStream(20, 20, 30, true));
  auto compat = runMetricRule("BatchSize", p, analysedToTheEnd(batchStream(20, 20, 30, true)), true);
  EXPECT_DOUBLE_EQ(fixed.report["Details"]["algo-1"]["gpu0_memory"]["upper"].get<double>(), 29.0);
  // IQR = mem p75 - util p25 = -5.75: upper = 24.25 - 8.625.
  EXPECT_DOUBLE_EQ(compat.report["Details"]["algo-1"]["gpu0_memory"]["upper"].get<double>(), 15.625);
  EXPECT_DOUBLE_EQ(compat.report["Details"]["algo-1"]["gpu0_memory"]["lower"].get<double>(), 23.375);
}

std::unique_ptr<VectorMetricSource> twoGpus(double a, double b, int n = 30) {
  auto src = std::make_unique<VectorMetricSource>();
  for (int i = 0; i < n; ++i) addSnapshot(*src, kT0 + i * 500000, "algo-1", Snapshot{{}, {a, b}, {}, {}});
  return src;
}

TEST(LoadBalancing, FixedRuleComparesEveryGpuPair) {
  auto r = runMetricRule("LoadBalancing", {{"patience", 10}}, twoGpus(95, 3));
  ASSERT_FALSE(r.findings.empty());
  EXPECT_NEAR(r.report["Details"]["algo-1"]["distances"]["gpu0"]["gpu1"].get<double>(), std::sqrt(std::log(2.0)), 1e-9);
  EXPECT_TRUE(runMetricRule("LoadBalancing", {{"patience", 10}}, twoGpus(90, 91)).findings.empty());
  EXPECT_TRUE(runMetricRule("LoadBalancing", {{"patience", 30}}, twoGpus(95, 3)).findings.empty());  // not > patience
  EXPECT_EQ(r.report["RuleParameters"], "threshold:0.5\npatience:10");
}

TEST(LoadBalancing, CompatNeverFiresAndDropsValuesAbove98) {
  auto r = runMetricRule("LoadBalancing", {{"patience", 10}, {"threshold", 0}}, analysedToTheEnd(twoGpus(99, 3)), true);
  EXPECT_TRUE(r.findings.empty());
  EXPECT_EQ(r.report["RuleTriggered"], 0);
  const auto& w = r.report["Details"]["algo-1"]["workloads"];
  EXPECT_EQ(w["gpu0"].size(), 49u);
  int64_t kept = 0;
  for (auto c : w["gpu0"]) kept += c.get<int64_t>();
  EXPECT_EQ(kept, 0);  // every 99 dropped by np.arange(0, 100, 2) bins
  auto fixed = runMetricRule("LoadBalancing", {{"patience", 10}}, twoGpus(99, 3));
  int64_t kept2 = 0;
  for (auto c : fixed.report["Details"]["algo-1"]["workloads"]["gpu0"]) kept2 += c.get<int64_t>();
  EXPECT_EQ(kept2, 30);
}

// Two ranks, 30 steps of 1 s; per step rank 0 computes c0 s, rank 1 c1 s.
std::unique_ptr<VectorMetricSource> rankStream(double c0, double c1) {
  auto src = std::make_unique<VectorMetricSource>();
  for (int s = 0; s < 30; ++s) {
    const int64_t t = kT0 + s * kSec;
    for (int rank = 0; rank < 2; ++rank) {
      src->push(stepEvent(rank, s, t, kSec - 1));
      src->push(event(rank, "Forward", "stage", t + 1, int64_t((rank ? c1 : c0) * kSec), s));
    }
  }
  return src;
}

TEST(LoadBalancing, RankComputeImbalance) {
  auto r = runMetricRule("LoadBalancing", json::object(), rankStream(0.9, 0.3));
  ASSERT_FALSE(r.findings.empty());
  EXPECT_NE(r.findings.back().message.find("compute per step"), std::string::npos);
  EXPECT_EQ(r.findings.back().subjects.front(), "rank 0");
  EXPECT_TRUE(r.report["Details"].contains("heatmap"));
  EXPECT_EQ(r.report["Datapoints"], 60);  // the ranks' steps (no GPU samples here)
  EXPECT_TRUE(runMetricRule("LoadBalancing", json::object(), rankStream(0.9, 0.8)).findings.empty());
  EXPECT_TRUE(runMetricRule("LoadBalancing", json::object(), analysedToTheEnd(rankStream(0.9, 0.3)), true).findings.empty());
}

// A 2-stage pipeline, 30 steps of 1 s: stage 0 (rank 0) runs fc1 (forward 100 ms, backward
// 150 ms) and fc2 (forward 200 ms, backward 350 ms) inside its stage slices; stage 1 (rank 1)
// computes 300 ms in one layer, head.
std::unique_ptr<VectorMetricSource> layeredPipeline() {
  auto src = std::make_unique<VectorMetricSource>();
  const int64_t ms = 1000;
  for (int s = 0; s < 30; ++s) {
    const int64_t t = kT0 + s * kSec;
    src->push(stepEvent(0, s, t, kSec - 1));
    src->push(stepEvent(1, s, t, kSec - 1));
    FrameworkEvent f0 = event(0, "Forward", "stage 0", t + 1, 300 * ms, s),
                   b0 = event(0, "Backward(post-forward)", "stage 0", t + 400 * ms, 500 * ms, s);
    f0.args.push_back({"stage", "0"});
    b0.args.push_back({"stage", "0"});
    src->push(f0);
    src->push(event(0, "Forward-SubModuleInternal", "fc1", t + 1, 100 * ms, s));
    src->push(event(0, "Forward-SubModuleInternal", "fc2", t + 1 + 100 * ms, 200 * ms, s));
    src->push(b0);
    src->push(event(0, "Backward-SubModuleInternal", "fc2", t + 400 * ms, 350 * ms, s));
    src->push(event(0, "Backward-SubModuleInternal", "fc1", t + 750 * ms, 150 * ms, s));
    FrameworkEvent f1 = event(1, "Forward", "stage 1", t + 1, 300 * ms, s);
    f1.args.push_back({"stage", "1"});
    src->push(f1);
    src->push(event(1, "Forward-SubModuleInternal", "head", t + 1, 300 * ms, s));
  }
  return src;
}

TEST(LoadBalancing, NamesTheSlowestLayerOfTheSlowStage) {
  auto r = runMetricRule("LoadBalancing", json::object(), layeredPipeline());
  ASSERT_FALSE(r.findings.empty());
  const Finding& f = r.findings.back();
  EXPECT_NE(f.message.find("rank 0, stage 0 is the slow stage"), std::string::npos) << f.message;
  // fc2: 200 + 350 = 550 ms of the stage's 800 ms per step (fc1: 250 ms).
  EXPECT_NE(
      f.message.find("its slowest layer is fc2 (forward 200.0 ms + backward 350.0 ms per step, 69% of its compute)"),
      std::string::npos)
      << f.message;
  EXPECT_EQ(f.details["slow_layer"]["name"], "fc2");
  EXPECT_DOUBLE_EQ(f.details["slow_layer"]["ms_per_step"].get<double>(), 550.0);
  EXPECT_EQ(r.report["Details"]["ranks"]["1"]["slowest_layer"], "head");
  // Without per-layer slices the finding says nothing about layers.
  auto plain = runMetricRule("LoadBalancing", json::object(), rankStream(0.9, 0.3));
  ASSERT_FALSE(plain.findings.empty());
  EXPECT_EQ(plain.findings.back().message.find("slowest layer"), std::string::npos);
}

std::unique_ptr<VectorMetricSource> initStream(int64_t firstStepUs) {
  auto src = std::make_unique<VectorMetricSource>();
  for (int i = 0; i < 10; ++i) addSnapshot(*src, kT0 + i * 30 * kSec, "algo-1", Snapshot{{10}, {}, {}, {}});
  if (firstStepUs >= 0) src->push(stepEvent(0, 0, kT0 + firstStepUs, kSec));
  return src;
}

TEST(MaxInitializationTime, NoStepAfterThreshold) {
  auto r = runMetricRule("MaxInitializationTime", {{"threshold", 1}}, initStream(-1));
  EXPECT_FALSE(r.findings.empty());
  EXPECT_DOUBLE_EQ(r.report["Details"]["job_start"].get<double>(), kT0 / 1e6);
  EXPECT_TRUE(runMetricRule("MaxInitializationTime", {{"threshold", 10}}, initStream(-1)).findings.empty());
  EXPECT_TRUE(runMetricRule("MaxInitializationTime", {{"threshold", 1}}, initStream(30 * kSec)).findings.empty());
}

TEST(MaxInitializationTime, LateFirstStepFiresOnlyWhenFixed) {
  // First step at 90 s with a 1-minute threshold: the reference never sees it (the step
  // arrives in the window whose start is exactly 60 s).
  EXPECT_FALSE(runMetricRule("MaxInitializationTime", {{"threshold", 1}}, initStream(90 * kSec)).findings.empty());
  EXPECT_TRUE(runMetricRule("MaxInitializationTime", {{"threshold", 1}}, initStream(90 * kSec), true).findings.empty());
}

TEST(MaxInitializationTime, CompatIsInertInsideProfilerReport) {
  auto standalone = runMetricRule("MaxInitializationTime", {{"threshold", 1}}, initStream(-1), true);
  EXPECT_FALSE(standalone.findings.empty());
  EngineOptions opts;
  opts.compat = true;
  Engine engine(opts);
  engine.addRules({RuleSpec{"ProfilerReport", {{"MaxInitializationTime_threshold", 1}}}});
  auto src = initStream(-1);
  src->finish();
  engine.setMetricSource(std::move(src));
  engine.finish();
  EXPECT_EQ(engine.reportJson("MaxInitializationTime")["RuleTriggered"], 0);
  Engine fixedEngine;
  fixedEngine.addRules({RuleSpec{"ProfilerReport", {{"MaxInitializationTime_threshold", 1}}}});
  auto src2 = initStream(-1);
  src2->finish();
  fixedEngine.setMetricSource(std::move(src2));
  fixedEngine.finish();
  EXPECT_GT(fixedEngine.reportJson("MaxInitializationTime")["RuleTriggered"].get<int>(), 0);
}

// 212 steps, one per second, 0.1 s long, except `outliers` of 2 s among the first 50.
std::unique_ptr<VectorMetricSource> stepStream(int outliers) {
  auto src = std::make_unique<VectorMetricSource>();
  for (int s = 0; s < 212; ++s) {
    const bool slow = s < 50 && s % 4 == 0 && s / 4 < outliers;
    src->push(stepEvent(0, s, kT0 + s * kSec, slow ? 2 * kSec : kSec / 10));
  }
  return src;
}

TEST(StepOutlier, MoreThanNOutliersFire) {
  auto r = runMetricRule("StepOutlier", json::object(), stepStream(12));
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.report["Violations"], 12);
  EXPECT_EQ(r.report["Details"]["step_details"]["algo-1-0"]["number_of_outliers"], 12);
  EXPECT_EQ(r.report["Details"]["step_details"]["algo-1-0"]["step_numbers"].size(), 12u);
  EXPECT_EQ(r.report["RuleParameters"], "threshold:3\nmode:None\nn_outliers:10\nstddev:3");
  EXPECT_TRUE(runMetricRule("StepOutlier", json::object(), stepStream(10)).findings.empty());  // 10 is not > 10
}

TEST(StepOutlier, CompatReAddsViolationsEveryWindow) {
  auto compat = runMetricRule("StepOutlier", json::object(), stepStream(12), true);
  // Series longer than 100 steps in windows 1 and 2 (steps 101..212; window 3 is the dropped
  // last minute): 12 outliers counted twice.
  EXPECT_EQ(compat.report["Violations"], 24);
  auto fixed = runMetricRule("StepOutlier", json::object(), stepStream(12));
  EXPECT_EQ(fixed.report["Violations"], 12);
}

std::unique_ptr<VectorMetricSource> loaderStream(int pidsPerSecond, int seconds = 20) {
  auto src = std::make_unique<VectorMetricSource>();
  for (int s = 0; s < seconds; ++s) {
    addSnapshot(*src, kT0 + s * kSec, "algo-1", Snapshot{std::vector<double>(8, 50), {}, {}, {}});
    for (int p = 0; p < pidsPerSecond; ++p) {
      FrameworkEvent e = event(0, "DataLoaderIter", "next", kT0 + s * kSec + p * 1000, 500);
      e.pid = 1000 + p;
      src->push(e);
    }
  }
  return src;
}

TEST(Dataloader, TooFewAndTooManyLoaders) {
  auto few = runMetricRule("Dataloader", json::object(), loaderStream(1));
  ASSERT_FALSE(few.findings.empty());  // 1 < 70% of 8 cores
  EXPECT_EQ(few.report["Details"]["cores"], 8);
  EXPECT_EQ(few.report["Details"]["dataloaders"], 1);
  EXPECT_EQ(few.report["RuleTriggered"], 1);
  EXPECT_TRUE(runMetricRule("Dataloader", json::object(), loaderStream(8)).findings.empty());
  EXPECT_FALSE(runMetricRule("Dataloader", json::object(), loaderStream(17)).findings.empty());  // > 200% of 8
  EXPECT_TRUE(runMetricRule("Dataloader", json::object(), loaderStream(1, 10)).findings.empty());  // patience 10
}

// `ranks` ranks for 20 s, each with one loader process of its own (its own pid, as a Strata
// rank's DataLoaderIter events carry), rank r on host "algo-<hostOf(r)+1>" with 2 cores.
std::unique_ptr<VectorMetricSource> rankLoaders(int ranks, int (*hostOf)(int)) {
  auto src = std::make_unique<VectorMetricSource>();
  std::set<int> hosts;
  for (int r = 0; r < ranks; ++r) hosts.insert(hostOf(r));
  for (int s = 0; s < 20; ++s) {
    for (int h : hosts) addSnapshot(*src, kT0 + s * kSec, "algo-" + std::to_string(h + 1), Snapshot{{50, 50}, {}, {}, {}});
    for (int r = 0; r < ranks; ++r) {
      FrameworkEvent e = event(r, "DataLoaderIter", "DataLoaderIter", kT0 + s * kSec + r * 1000, 500);
      e.node = "algo-" + std::to_string(hostOf(r) + 1) + "-" + std::to_string(r);
      e.pid = 1000 + r;
      src->push(e);
    }
  }
  return src;
}

TEST(Dataloader, RanksOfOneHostShareItsCores) {
  // 2 ranks on one 2-core host, each loading in its own process: 2 loaders for 2 cores, healthy
  // (counted per rank it would be 1 for 2 cores, below 70%: a false alarm).
  auto oneHost = runMetricRule("Dataloader", json::object(), rankLoaders(2, [](int) { return 0; }));
  EXPECT_TRUE(oneHost.findings.empty()) << oneHost.findings[0].message;
  EXPECT_EQ(oneHost.report["Details"]["dataloaders"], 2);
  EXPECT_EQ(oneHost.report["Details"]["cores"], 2);
  // The same ranks on two 2-core hosts: one loader per host, below 70% of its cores.
  auto twoHosts = runMetricRule("Dataloader", json::object(), rankLoaders(2, [](int r) { return r; }));
  ASSERT_FALSE(twoHosts.findings.empty());
  EXPECT_EQ(twoHosts.report["Details"]["dataloaders"], 1);
  // Compat pools every host, as the reference does: 2 loaders, 2 core names.
  auto compat = runMetricRule("Dataloader", json::object(), analysedToTheEnd(rankLoaders(2, [](int r) { return r; })), true);
  EXPECT_TRUE(compat.findings.empty());
  EXPECT_EQ(compat.report["Details"]["dataloaders"], 2);
}

TEST(Dataloader, HostOfAnEvent) {
  FrameworkEvent e = event(3, "DataLoaderIter", "DataLoaderIter", kT0, 1);
  e.node = "algo-2-3";
  EXPECT_EQ(eventHostKey(e), "algo-2");
  e.node = "algo-2-13";  // another rank's suffix is not this rank's
  EXPECT_EQ(eventHostKey(e), "algo-2-13");
  e.node = "";
  EXPECT_EQ(eventHostKey(e), "rank-3");
}

// `batches` steps of rank 0: a DataLoaderIter wait of `waitUs` ending where a step of
// `stepUs` begins (as the profiler records them), on an 8-core host. The loader events span
// less than `patience` seconds, so the reference's process count never judges them.
std::unique_ptr<VectorMetricSource> waitStream(int batches, int64_t waitUs, int64_t stepUs) {
  auto src = std::make_unique<VectorMetricSource>();
  int64_t t = kT0;
  for (int s = 0; s <= 20; ++s) addSnapshot(*src, kT0 + s * kSec, "algo-1", Snapshot{std::vector<double>(8, 50), {}, {}, {}});
  for (int b = 0; b < batches; ++b) {
    FrameworkEvent load = event(0, "DataLoaderIter", "DataLoaderIter", t, waitUs);
    src->push(load);
    src->push(stepEvent(0, b, t + waitUs, stepUs));
    t += waitUs + stepUs;
  }
  return src;
}

TEST(Dataloader, SlowLoaderFiresAboveTheWaitThreshold) {
  // 30 ms waiting + 20 ms computing: 60 % of each step waiting, above the default 50 %.
  auto slow = runMetricRule("Dataloader", json::object(), waitStream(12, 30000, 20000));
  ASSERT_EQ(slow.findings.size(), 1u);
  EXPECT_NE(slow.findings[0].message.find("algo-1-0 waits for its next batch 60.0% of each step"), std::string::npos)
      << slow.findings[0].message;
  EXPECT_EQ(slow.report["RuleTriggered"], 1);
  EXPECT_DOUBLE_EQ(slow.report["Details"]["data_wait"]["algo-1-0"]["percent"].get<double>(), 60.0);
  EXPECT_EQ(slow.report["Details"]["data_wait"]["algo-1-0"]["batches"], 12);
  // Exactly at the threshold does not fire (strictly more than wait_threshold %).
  EXPECT_TRUE(runMetricRule("Dataloader", json::object(), waitStream(12, 25000, 25000)).findings.empty());
  EXPECT_FALSE(runMetricRule("Dataloader", json::object(), waitStream(12, 25001, 25000)).findings.empty());
  EXPECT_TRUE(runMetricRule("Dataloader", {{"wait_threshold", 70}}, waitStream(12, 30000, 20000)).findings.empty());
  // Fewer than 10 batches: not enough to judge.
  EXPECT_TRUE(runMetricRule("Dataloader", json::object(), waitStream(9, 30000, 20000)).findings.empty());
  EXPECT_FALSE(runMetricRule("Dataloader", json::object(), waitStream(10, 30000, 20000)).findings.empty());
  // A fast loader: no finding.
  EXPECT_TRUE(runMetricRule("Dataloader", json::object(), waitStream(50, 100, 20000)).findings.empty());
}

TEST(Dataloader, CompatIgnoresTheWait) {
  EXPECT_TRUE(runMetricRule("Dataloader", json::object(), waitStream(12, 30000, 20000), true).findings.empty());
}

TEST(OverallSystemUsage, PerNodeStatistics) {
  auto src = std::make_unique<VectorMetricSource>();
  for (int i = 0; i <= 100; ++i)
    addSnapshot(*src, kT0 + i * 500000, "algo-1", Snapshot{{double(i), double(i)}, {50}, {40}, {}, 30});
  auto r = runMetricRule("OverallSystemUsage", json::object(), std::move(src));
  EXPECT_TRUE(r.findings.empty());
  const auto& cpu = r.report["Details"]["CPU"]["algo-1"];
  EXPECT_DOUBLE_EQ(cpu["p95"].get<double>(), 95);
  EXPECT_DOUBLE_EQ(cpu["max"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(r.report["Details"]["CPU memory"]["algo-1"]["p50"].get<double>(), 30);
  EXPECT_EQ(r.report["Datapoints"], 101);
  EXPECT_TRUE(r.report["Details"]["timeseries"]["CPU"].contains("algo-1"));
}

TEST(OverallSystemUsage, CompatDividesByCoresOfAllNodes) {
  auto make = [] {
    auto src = std::make_unique<VectorMetricSource>();
    for (int i = 0; i < 10; ++i) {
      addSnapshot(*src, kT0 + i * kSec, "algo-1", Snapshot{{40, 40}, {}, {}, {}});
      addSnapshot(*src, kT0 + i * kSec, "algo-2", Snapshot{{40, 40, 40, 40}, {}, {}, {}});
    }
    return src;
  };
  auto fixed = runMetricRule("OverallSystemUsage", json::object(), make());
  EXPECT_DOUBLE_EQ(fixed.report["Details"]["CPU"]["algo-1"]["p50"].get<double>(), 40);
  auto compat = runMetricRule("OverallSystemUsage", json::object(), analysedToTheEnd(make()), true);
  EXPECT_DOUBLE_EQ(compat.report["Details"]["CPU"]["algo-1"]["p50"].get<double>(), 20);  // 80 / 4 core names
}

TEST(OverallFrameworkMetrics, BreakdownRanksAndLayers) {
  auto src = std::make_unique<VectorMetricSource>();
  for (int s = 0; s < 10; ++s) {
    const int64_t t = kT0 + s * kSec;
    src->push(stepEvent(0, s, t, 800000));
    src->push(event(0, "Forward", "fc1", t, 200000, s));
    src->push(event(0, "Backward(post-forward)", "fc1", t + 200000, 400000, s));
    src->push(event(0, "AllReduceWait", "wait bucket 0", t + 600000, 100000, s));
  }
  auto r = runMetricRule("OverallFrameworkMetrics", json::object(), std::move(src));
  EXPECT_TRUE(r.findings.empty());
  const auto& d = r.report["Details"];
  EXPECT_NEAR(d["phase"]["Step:ModeKeys.TRAIN"].get<double>() + d["phase"]["others"].get<double>(), 100, 1e-9);
  EXPECT_EQ(d["top_layers"][0]["name"], "fc1");
  EXPECT_NEAR(d["ranks"]["0"]["wait_s"].get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(d["ranks"]["0"]["compute_s"].get<double>(), 6.0, 1e-9);
  EXPECT_EQ(r.report["Datapoints"], 40);
}

TEST(OverallFrameworkMetrics, CompatReportsNoDatapointsAsTheReferenceDoes) {
  // overall_framework_metrics.py never counts its events: Datapoints stays 0, and the rule has
  // data all the same.
  auto src = std::make_unique<VectorMetricSource>();
  for (int s = 0; s < 10; ++s) src->push(stepEvent(0, s, kT0 + s * kSec, 800000));
  auto r = runMetricRule("OverallFrameworkMetrics", json::object(), analysedToTheEnd(std::move(src)), true);
  EXPECT_EQ(r.report["Datapoints"], 0);
  EXPECT_EQ(r.summary.status, RuleStatus::kNoIssuesFound);
  EXPECT_TRUE(r.report["Details"]["phase"].contains("Step:ModeKeys.TRAIN"));
}

TEST(ProfilerReport, OverridesAndSubRuleOutputs) {
  Engine engine;
  engine.addRules({RuleSpec{"ProfilerReport", {{"CPUBottleneck_threshold", 20}, {"CPUBottleneck_patience", 5}}}});
  auto src = bottleneckStream(40, 10);  // 25% > 20%
  src->finish();
  engine.setMetricSource(std::move(src));
  const auto findings = engine.finish();
  EXPECT_EQ(engine.reportJson("CPUBottleneck")["RuleParameters"], "threshold:20\ncpu_threshold:90\ngpu_threshold:10\npatience:5");
  EXPECT_GT(engine.reportJson("CPUBottleneck")["RuleTriggered"].get<int>(), 0);
  EXPECT_EQ(engine.summary().size(), 11u);  // every sub-rule reports
  for (const auto& s : engine.summary()) EXPECT_EQ(s.group, "ProfilerReport");
  Engine bad;
  EXPECT_THROW(bad.addRules({RuleSpec{"ProfilerReport", {{"CPUBottleneck_treshold", 20}}}}), ConfigError);
  EXPECT_THROW(bad.addRules({RuleSpec{"ProfilerReport", {{"Nope_threshold", 20}}}}), ConfigError);
}

TEST(ProfilerReport, StandaloneSubRuleIsNotDuplicated) {
  Engine engine;
  engine.addRules({RuleSpec{"ProfilerReport", json::object()}, RuleSpec{"CPUBottleneck", {{"patience", 1}}}});
  int cpu = 0;
  for (const auto& s : engine.summary()) cpu += s.name == "CPUBottleneck";
  EXPECT_EQ(cpu, 1);
  EXPECT_EQ(engine.reportJson("CPUBottleneck")["RuleParameters"], "threshold:50\ncpu_threshold:90\ngpu_threshold:10\npatience:1");
}

}  // namespace
}  // namespace strata::rules::testing
