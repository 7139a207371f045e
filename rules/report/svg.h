// Inline SVG charts for the HTML report: self-contained markup, no scripts, no external fonts.
// Pure functions of their inputs.
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace strata::rules::report {

std::string escape(const std::string& s);          // HTML/SVG text
std::string fmt(double v, int significant = 3);    // 0.123, 12.3, 1.23k, 4.56M
std::string fmtDuration(double seconds);           // "2 h 03 min", "4.2 s", "35 ms"
const char* color(size_t i);                        // the report's palette

struct Series {
  std::string name;
  std::vector<double> x, y;
};
// x in seconds since `x0`, labelled in minutes or hours when long; or, with `xLabel`, plain x
// values under that label.
std::string lineChart(const std::vector<Series>& series, double x0, const std::string& yLabel,
                      std::optional<double> yMin = std::nullopt, std::optional<double> yMax = std::nullopt,
                      int width = 940, int height = 220, const std::string& xLabel = "");

// Horizontal bars, value labels at their ends.
std::string hbarChart(const std::vector<std::pair<std::string, double>>& bars, const std::string& unit,
                      int width = 940);

// One horizontal bar per row, split into parts (a legend names them).
struct StackRow {
  std::string label;
  std::vector<double> parts;
};
std::string stackedBars(const std::vector<StackRow>& rows, const std::vector<std::string>& partNames,
                        const std::string& unit, int width = 940);

// A histogram from counts and bin edges; `threshold` draws a dashed line, `outliers` red ticks.
std::string histogram(const std::vector<double>& counts, const std::vector<double>& edges,
                      const std::string& xLabel, std::optional<double> threshold = std::nullopt,
                      const std::vector<double>& outliers = {}, int width = 940, int height = 200);

struct Box {
  std::string label;
  double lower = 0, p25 = 0, p50 = 0, p75 = 0, upper = 0;
  std::optional<double> max;
};
std::string boxPlot(const std::vector<Box>& boxes, const std::string& yLabel, double yMin, double yMax,
                    int width = 940, int height = 230);

// Rows x time buckets; empty cells grey. Colour from low (light) to high (dark red).
std::string heatmap(const std::vector<std::string>& rows, const std::vector<std::vector<std::optional<double>>>& cells,
                    double bucketSec, const std::string& unit, int width = 940);

}  // namespace strata::rules::report
