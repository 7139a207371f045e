// The report's per-rank breakdown section: its markup from a breakdown, and its charts drawn
// by headless Chromium (a screenshot whose pixels show every time class's colour).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "png_decode.h"
#include "rules/report/breakdown_section.h"
#include "rules/report/html_report.h"

namespace strata::rules::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Two data-parallel ranks, rank 1 a straggler; every time class present.
json sampleBreakdown() {
  json ranks = json::array();
  for (int r = 0; r < 2; ++r) {
    json steps = json::object();
    for (int s = 5; s < 25; ++s) steps["TRAIN"][std::to_string(s)] = r == 1 ? 31.0 + s % 3 : 20.0 + s % 2;
    for (int s = 0; s < 3; ++s) steps["EVAL"][std::to_string(s)] = 7.0;  // numbered apart from TRAIN
    ranks.push_back({{"rank", r},
                     {"stages", json::array()},
                     {"steps", 20},
                     {"period_s", 1.0},
                     {"compute_s", r == 1 ? 0.62 : 0.40},
                     {"exposed_comm_s", r == 1 ? 0.05 : 0.25},
                     {"pipeline_wait_s", 0.08},
                     {"data_loading_s", 0.10},
                     {"idle_s", r == 1 ? 0.15 : 0.17},
                     {"comm_s", 0.3},
                     {"overlap_percent", r == 1 ? 80.0 : 35.0},
                     {"median_compute_per_step_ms", r == 1 ? 32.0 : 20.5},
                     {"compute_ms_by_step", steps}});
  }
  return {{"layout", "data parallel"},
          {"ranks", ranks},
          {"stragglers",
           json::array({{{"rank", 1}, {"evidence", "rank 1 was the slowest in 20 of 20 steps; its compute per step "
                                                   "(median 32.00 ms) is 1.56x that of rank(s) 0 (20.50 ms)"}}})}};
}

TEST(BreakdownReport, SectionMarkup) {
  const std::string html = report::renderBreakdownSection(sampleBreakdown());
  for (const char* needle : {"id=\"breakdown\"", "Where the time went, per rank", "<svg", "exposed communication",
                             "pipeline wait", "data loading", "idle", "Straggler:", "rank 1 was the slowest",
                             "Communication hidden by compute", "Compute per step"})
    EXPECT_NE(html.find(needle), std::string::npos) << needle;
  // One compute-per-step series per rank and mode: the EVAL steps are not merged into TRAIN's.
  EXPECT_NE(html.find("rank 1 EVAL"), std::string::npos);
  const std::string empty = report::renderBreakdownSection(nullptr);
  EXPECT_NE(empty.find("No framework timeline"), std::string::npos);
  json balanced = sampleBreakdown();
  balanced["stragglers"] = json::array();
  EXPECT_NE(report::renderBreakdownSection(balanced).find("No straggler"), std::string::npos);
}

std::string browser() {
  for (const char* c : {"chromium", "chromium-browser", "google-chrome"})
    if (std::system(("command -v " + std::string(c) + " > /dev/null 2>&1").c_str()) == 0) return c;
  return "";
}

// The report with the breakdown section, rendered by Chromium: each of the five time classes'
// colours covers a visible area of the screenshot (the stacked bars), and the overlap bars
// and per-step lines add more of the first colours. Chromium is a test dependency
// (scripts/install-deps); without it this test fails rather than skips.
TEST(BreakdownReport, ChartsRenderInHeadlessChromium) {
  const std::string exe = browser();
  ASSERT_FALSE(exe.empty()) << "Chromium is needed (scripts/install-deps installs it)";
  const fs::path dir = fs::temp_directory_path() / ("strata_breakdown_report_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  report::ReportInput in;
  in.runDir = "synthetic";
  in.breakdown = sampleBreakdown();
  const fs::path html = dir / "report.html";
  std::ofstream(html) << report::renderReport(in);
  const fs::path png = dir / "shot.png";
  const std::string cmd = "timeout 120 " + exe +
                          " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run "
                          "--disable-background-networking --disable-component-update --disable-sync "
                          "--user-data-dir='" + (dir / "profile").string() +
                          "' --hide-scrollbars --window-size=1100,2400 --screenshot='" + png.string() + "' 'file://" +
                          html.string() + "' > '" + (dir / "chromium.log").string() + "' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "see " << (dir / "chromium.log");
  const strata::testing::Image img = strata::testing::decodePng(png.string());
  EXPECT_EQ(img.width, 1100);
  const char* names[] = {"compute", "exposed comm", "pipeline wait", "data loading", "idle"};
  for (int c = 0; c < 5; ++c) {
    const int64_t pixels = strata::testing::countColor(img, report::breakdownColor(c));
    // Bars are 15 px high: a 5 % share of ~700 px is ~500 px per rank.
    EXPECT_GT(pixels, 600) << names[c] << " (" << report::breakdownColor(c) << ") barely visible";
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata::rules::testing
