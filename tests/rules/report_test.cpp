// The HTML report: every section present, self-contained, built from rule-output/ alone; and a
// headless-Chromium render when Chromium is installed (skipped otherwise).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "rules/report/html_report.h"
#include "rules/report/svg.h"
#include "rules_test_util.h"

namespace strata::rules::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A small run through the engine: 3 minutes, 2 GPUs (one idle), 2 ranks (one slow), NaN loss.
fs::path makeRun() {
  const fs::path dir = fs::temp_directory_path() / ("strata_report_" + std::to_string(getpid()));
  fs::remove_all(dir);
  EngineOptions opts;
  opts.runDir = dir.string();
  Engine engine(opts);
  engine.addRules({RuleSpec{"ProfilerReport", {{"LowGPUUtilization_patience", 10}, {"StepOutlier_n_outliers", 1}}},
                   RuleSpec{"ExplodingTensor"}});
  auto src = std::make_unique<VectorMetricSource>();
  for (int i = 0; i < 360; ++i)
    addSnapshot(*src, kT0 + i * 500000, "algo-1", Snapshot{{30, 40}, {90, 5}, {40, 40}, {1, 1}, 35});
  for (int s = 0; s < 150; ++s)
    for (int rank = 0; rank < 2; ++rank) {
      const int64_t t = kT0 + 20 * kSec + s * kSec;
      src->push(stepEvent(rank, s, t, (rank ? 900000 : 400000) + (s % 50 == 7 ? 3 * kSec : 0)));
      src->push(event(rank, "Forward", "fc1", t, 150000, s));
      src->push(event(rank, "Backward(post-forward)", "fc1", t + 150000, 200000, s));
    }
  src->finish();
  engine.setMetricSource(std::move(src));
  auto trial = std::make_unique<MemoryTensorSource>();
  trial->mutableTrial().addScalar(10, "loss", std::nan(""));
  engine.setTensorSource(std::move(trial));
  engine.finish();
  return dir;
}

TEST(Report, EverySectionFromRuleOutputs) {
  const fs::path dir = makeRun();
  const std::string path = report::writeReport(dir.string());
  EXPECT_EQ(path, (dir / "rule-output" / "profiler-report.html").string());
  std::ifstream in(path);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const std::string needle :
       {"<!DOCTYPE html>", "id=\"job\"", "Job summary", "Initialisation", "Training loop", "Finalisation",
        "id=\"rules\"", "Rules summary", "id=\"system\"", "System usage per node", "GPU memory", "id=\"framework\"",
        "Time per phase", "Step durations", "outlier step(s)", "Layers taking the most time", "Time per rank",
        "Forward and backward passes", "id=\"heatmap\"", "Step time per rank", "id=\"analysis\"", "Rule analyses",
        "rule-ExplodingTensor", "rule-LowGPUUtilization", "Recommendation", "IssuesFound", "<svg"}) {
    EXPECT_NE(html.find(needle), std::string::npos) << needle;
  }
  // Self-contained: no scripts, no external resources.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Report, EmptyRunSaysSo) {
  report::ReportInput in;
  in.runDir = "/nowhere";
  const std::string html = report::renderReport(in);
  EXPECT_NE(html.find("No rule results"), std::string::npos);
  EXPECT_NE(html.find("No system metrics"), std::string::npos);
}

TEST(Report, SvgPrimitivesEscapeAndScale) {
  EXPECT_EQ(report::escape("<a&\"b\">"), "&lt;a&amp;&quot;b&quot;&gt;");
  EXPECT_EQ(report::fmtDuration(7260), "2 h 01 min");
  EXPECT_EQ(report::fmtDuration(0.035), "35 ms");
  const std::string svg = report::hbarChart({{"x<y", 3}, {"z", 6}}, "%");
  EXPECT_NE(svg.find("x&lt;y"), std::string::npos);
  EXPECT_NE(svg.find("6%"), std::string::npos);
}

// Renders with headless Chromium when it is installed; the screenshot must not be empty.
TEST(Report, RendersInHeadlessChromium) {
  const char* candidates[] = {"chromium", "chromium-browser", "google-chrome"};
  std::string browser;
  for (const char* c : candidates)
    if (std::system(("command -v " + std::string(c) + " > /dev/null 2>&1").c_str()) == 0) {
      browser = c;
      break;
    }
  if (browser.empty()) GTEST_SKIP() << "no Chromium installed";
  const fs::path dir = makeRun();
  const std::string html = report::writeReport(dir.string());
  const fs::path png = dir / "report.png";
  const std::string cmd = "timeout 120 " + browser +
                          " --headless --no-sandbox --disable-gpu --disable-background-networking --no-first-run "
                          "--window-size=1200,3000 --screenshot='" +
                          png.string() + "' 'file://" + html + "' > '" + (dir / "chromium.log").string() + "' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "see " << (dir / "chromium.log");
  ASSERT_TRUE(fs::exists(png));
  EXPECT_GT(fs::file_size(png), 20000u);  // a blank page is a few kB
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata::rules::testing
