// The profiling report: one self-contained HTML file (inline CSS and SVG, no scripts, no
// network) built from rule-output/*.json alone, like smdebug's report notebook (specs/smdebug.md
// §5). Sections: job summary, rules summary, system usage per node, framework summary (phases,
// step durations with outliers, top layers, forward/backward, time per rank), per-rank heatmap,
// and one analysis per rule.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace strata::rules::report {

struct ReportInput {
  std::string runDir;
  std::map<std::string, nlohmann::json> rules;  // rule name -> rule-output/<Rule>.json
  nlohmann::json summary;                       // rule-output/summary.json (may be null)
  nlohmann::json breakdown;                     // profiler::toJson(Breakdown) of the timeline (may be null)
  std::string generatedAt;                      // e.g. "2024-05-01 12:00 UTC"
};

// Reads rule-output/*.json under runDir (missing folder: no rules) and the per-rank breakdown
// of the run's framework timeline (profiler/breakdown.h).
ReportInput loadReportInput(const std::string& runDir);
// Pure: the HTML text.
std::string renderReport(const ReportInput& input);
// Renders and writes <runDir>/rule-output/profiler-report.html; returns its path. Throws
// std::runtime_error when it cannot be written.
std::string writeReport(const std::string& runDir);

}  // namespace strata::rules::report
