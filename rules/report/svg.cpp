#include "rules/report/svg.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace strata::rules::report {
namespace {

constexpr const char* kPalette[] = {"#2f6fb0", "#e07b39", "#3a9a5b", "#c2413b", "#7d5ba6",
                                    "#8c6d46", "#d36ba3", "#6b7280", "#b5a22c", "#2aa3b5"};
constexpr int kLeft = 58, kRight = 16, kTop = 14, kBottom = 34;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A "nice" step for about `count` ticks over [lo, hi].
double niceStep(double lo, double hi, int count) {
  const double span = hi - lo;
  if (!(span > 0)) return 1;
  const double raw = span / count;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

struct Axis {
  double lo, hi, step;
};

Axis niceAxis(double lo, double hi, int count = 5) {
  if (!(hi > lo)) {
    hi = lo + (lo == 0 ? 1 : std::fabs(lo) * 0.1);
  }
  const double step = niceStep(lo, hi, count);
  return {std::floor(lo / step) * step, std::ceil(hi / step) * step, step};
}

std::string text(double x, double y, const std::string& s, const char* anchor = "middle", const char* cls = "tick") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" text-anchor=\"" + anchor + "\" class=\"" + cls + "\">" +
         escape(s) + "</text>";
}

std::string svgOpen(int w, int h) {
  return "<svg class=\"chart\" viewBox=\"0 0 " + std::to_string(w) + " " + std::to_string(h) + "\" width=\"" +
         std::to_string(w) + "\" height=\"" + std::to_string(h) + "\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">";
}

// Time unit for an axis spanning `span` seconds.
std::pair<double, std::string> timeUnit(double span) {
  if (span > 3 * 3600) return {3600, "hours since start"};
  if (span > 300) return {60, "minutes since start"};
  return {1, "seconds since start"};
}

std::string legend(const std::vector<std::string>& names, int x, int y, int width) {
  std::string out;
  int cx = x;
  for (size_t i = 0; i < names.size(); ++i) {
    const int w = 22 + static_cast<int>(names[i].size()) * 7;
    if (cx + w > width && cx > x) {
      cx = x;
      y += 16;
    }
    out += "<rect x=\"" + std::to_string(cx) + "\" y=\"" + std::to_string(y - 9) + "\" width=\"10\" height=\"10\" rx=\"2\" fill=\"" +
           color(i) + "\"/>";
    out += text(cx + 14, y, names[i], "start", "legend");
    cx += w;
  }
  return out;
}

}  // namespace

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fmt(double v, int significant) {
  if (std::isnan(v)) return "–";
  if (std::isinf(v)) return v > 0 ? "∞" : "-∞";
  const double a = std::fabs(v);
  char buf[32];
  if (a >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.*gG", significant, v / 1e9);
  } else if (a >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.*gM", significant, v / 1e6);
  } else if (significant >= 6 && v == std::floor(v)) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else if (a >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.*gk", significant, v / 1e3);
  } else if (a != 0 && a < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.2e", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.*g", significant, v);
  }
  return buf;
}

std::string fmtDuration(double s) {
  if (std::isnan(s)) return "–";
  char buf[48];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%d h %02d min", static_cast<int>(s / 3600), static_cast<int>(std::fmod(s, 3600) / 60));
  } else if (s >= 120) {
    std::snprintf(buf, sizeof buf, "%d min %02d s", static_cast<int>(s / 60), static_cast<int>(std::fmod(s, 60)));
  } else if (s >= 1) {
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f ms", s * 1000);
  }
  return buf;
}

const char* color(size_t i) { return kPalette[i % (sizeof kPalette / sizeof kPalette[0])]; }

std::string lineChart(const std::vector<Series>& series, double x0, const std::string& yLabel,
                      std::optional<double> yMin, std::optional<double> yMax, int width, int height,
                      const std::string& xLabel) {
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  for (const Series& s : series)
    for (size_t i = 0; i < s.x.size(); ++i) {
      xmin = std::min(xmin, s.x[i] - x0);
      xmax = std::max(xmax, s.x[i] - x0);
      ymin = std::min(ymin, s.y[i]);
      ymax = std::max(ymax, s.y[i]);
    }
  if (!std::isfinite(xmin)) return "<p class=\"muted\">No data.</p>";
  const bool withLegend = series.size() > 1;
  const int legendRows = withLegend ? 1 + static_cast<int>(series.size()) / 6 : 0;
  const int h = height + legendRows * 16 + (withLegend ? 8 : 0);
  auto [unit, unitName] = timeUnit(xmax - xmin);
  if (!xLabel.empty()) unit = 1, unitName = xLabel;
  const Axis xa = niceAxis(std::max(0.0, xmin) / unit, xmax / unit, 6);
  const Axis ya = niceAxis(yMin.value_or(std::min(0.0, ymin)), yMax.value_or(ymax), 4);
  const double pw = width - kLeft - kRight, ph = height - kTop - kBottom;
  auto X = [&](double x) { return kLeft + (x / unit - xa.lo) / (xa.hi - xa.lo) * pw; };
  auto Y = [&](double y) { return kTop + (1 - (y - ya.lo) / (ya.hi - ya.lo)) * ph; };
  std::string out = svgOpen(width, h);
  for (double y = ya.lo; y <= ya.hi + ya.step / 2; y += ya.step) {
    out += "<line class=\"grid\" x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft + pw) + "\" y1=\"" + num(Y(y)) + "\" y2=\"" + num(Y(y)) + "\"/>";
    out += text(kLeft - 6, Y(y) + 4, fmt(y), "end");
  }
  for (double x = xa.lo; x <= xa.hi + xa.step / 2; x += xa.step) out += text(X(x * unit), kTop + ph + 15, fmt(x), "middle");
  out += text(kLeft + pw / 2, kTop + ph + 30, unitName, "middle", "axis");
  out += "<text class=\"axis\" transform=\"translate(13," + num(kTop + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
         escape(yLabel) + "</text>";
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    std::string pts;
    for (size_t i = 0; i < s.x.size(); ++i) pts += num(X(s.x[i] - x0)) + "," + num(Y(s.y[i])) + " ";
    out += "<polyline fill=\"none\" stroke=\"" + std::string(color(k)) + "\" stroke-width=\"1.6\" points=\"" + pts + "\"/>";
  }
  out += "<rect class=\"frame\" x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(pw) + "\" height=\"" + num(ph) + "\"/>";
  if (withLegend) {
    std::vector<std::string> names;
    for (const auto& s : series) names.push_back(s.name);
    out += legend(names, kLeft, height + 12, width - kRight);
  }
  return out + "</svg>";
}

std::string hbarChart(const std::vector<std::pair<std::string, double>>& bars, const std::string& unit, int width) {
  if (bars.empty()) return "<p class=\"muted\">No data.</p>";
  size_t labelChars = 4;
  double vmax = 0;
  for (const auto& b : bars) {
    labelChars = std::max(labelChars, std::min<size_t>(b.first.size(), 34));
    vmax = std::max(vmax, b.second);
  }
  const int labelW = static_cast<int>(labelChars) * 7 + 10, rowH = 20;
  const int h = static_cast<int>(bars.size()) * rowH + 8;
  const double pw = width - labelW - 70;
  std::string out = svgOpen(width, h);
  for (size_t i = 0; i < bars.size(); ++i) {
    const double y = 4 + static_cast<double>(i) * rowH;
    std::string label = bars[i].first.size() > 34 ? bars[i].first.substr(0, 32) + "…" : bars[i].first;
    out += text(labelW - 8, y + 13, label, "end", "label");
    const double w = vmax > 0 ? bars[i].second / vmax * pw : 0;
    out += "<rect x=\"" + num(labelW) + "\" y=\"" + num(y + 2) + "\" width=\"" + num(std::max(w, 1.0)) +
           "\" height=\"14\" rx=\"2\" fill=\"" + color(0) + "\"><title>" + escape(bars[i].first) + ": " +
           fmt(bars[i].second) + unit + "</title></rect>";
    out += text(labelW + w + 5, y + 13, fmt(bars[i].second) + unit, "start", "value");
  }
  return out + "</svg>";
}

std::string stackedBars(const std::vector<StackRow>& rows, const std::vector<std::string>& partNames,
                        const std::string& unit, int width) {
  if (rows.empty()) return "<p class=\"muted\">No data.</p>";
  double vmax = 0;
  size_t labelChars = 4;
  for (const auto& r : rows) {
    double t = 0;
    for (double p : r.parts) t += std::max(0.0, p);
    vmax = std::max(vmax, t);
    labelChars = std::max(labelChars, std::min<size_t>(r.label.size(), 24));
  }
  const int labelW = static_cast<int>(labelChars) * 7 + 10, rowH = 22;
  const int h = static_cast<int>(rows.size()) * rowH + 30;
  const double pw = width - labelW - 80;
  std::string out = svgOpen(width, h);
  for (size_t i = 0; i < rows.size(); ++i) {
    const double y = 4 + static_cast<double>(i) * rowH;
    out += text(labelW - 8, y + 14, rows[i].label, "end", "label");
    double x = labelW, total = 0;
    for (size_t k = 0; k < rows[i].parts.size(); ++k) {
      const double v = std::max(0.0, rows[i].parts[k]);
      total += v;
      const double w = vmax > 0 ? v / vmax * pw : 0;
      if (w <= 0) continue;
      out += "<rect x=\"" + num(x) + "\" y=\"" + num(y + 3) + "\" width=\"" + num(w) + "\" height=\"15\" fill=\"" + color(k) +
             "\"><title>" + escape(rows[i].label + " " + (k < partNames.size() ? partNames[k] : "")) + ": " + fmt(v) + unit +
             "</title></rect>";
      const std::string inner = fmt(v) + unit;
      if (w > 12 + 6.5 * static_cast<double>(inner.size()))
        out += "<text x=\"" + num(x + w / 2) + "\" y=\"" + num(y + 14.5) + "\" text-anchor=\"middle\" class=\"inbar\">" +
               escape(inner) + "</text>";
      x += w;
    }
    out += text(x + 5, y + 14, fmt(total) + unit, "start", "value");
  }
  out += legend(partNames, labelW, h - 8, width);
  return out + "</svg>";
}

std::string histogram(const std::vector<double>& counts, const std::vector<double>& edges, const std::string& xLabel,
                      std::optional<double> threshold, const std::vector<double>& outliers, int width, int height) {
  if (counts.empty() || edges.size() != counts.size() + 1) return "<p class=\"muted\">No data.</p>";
  double lo = edges.front(), hi = edges.back(), cmax = 0;
  for (double c : counts) cmax = std::max(cmax, c);
  for (double o : outliers) hi = std::max(hi, o);
  if (threshold) hi = std::max(hi, *threshold);
  const Axis xa = niceAxis(lo, hi, 6);
  const Axis ya = niceAxis(0, std::max(1.0, cmax), 4);
  const double pw = width - kLeft - kRight, ph = height - kTop - kBottom;
  auto X = [&](double x) { return kLeft + (x - xa.lo) / (xa.hi - xa.lo) * pw; };
  auto Y = [&](double y) { return kTop + (1 - (y - ya.lo) / (ya.hi - ya.lo)) * ph; };
  std::string out = svgOpen(width, height);
  for (double y = ya.lo; y <= ya.hi + ya.step / 2; y += ya.step) {
    out += "<line class=\"grid\" x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft + pw) + "\" y1=\"" + num(Y(y)) + "\" y2=\"" + num(Y(y)) + "\"/>";
    out += text(kLeft - 6, Y(y) + 4, fmt(y), "end");
  }
  for (double x = xa.lo; x <= xa.hi + xa.step / 2; x += xa.step) out += text(X(x), kTop + ph + 15, fmt(x), "middle");
  out += text(kLeft + pw / 2, kTop + ph + 30, xLabel, "middle", "axis");
  out += "<text class=\"axis\" transform=\"translate(13," + num(kTop + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">count</text>";
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] <= 0) continue;
    const double x1 = X(edges[i]), x2 = X(edges[i + 1]);
    out += "<rect x=\"" + num(x1) + "\" y=\"" + num(Y(counts[i])) + "\" width=\"" + num(std::max(1.0, x2 - x1 - 0.5)) +
           "\" height=\"" + num(Y(0) - Y(counts[i])) + "\" fill=\"" + color(0) + "\"/>";
  }
  for (double o : outliers)
    out += "<line x1=\"" + num(X(o)) + "\" x2=\"" + num(X(o)) + "\" y1=\"" + num(Y(0)) + "\" y2=\"" + num(Y(0) - 14) +
           "\" stroke=\"" + color(3) + "\" stroke-width=\"2\"><title>outlier " + fmt(o) + "</title></line>";
  if (threshold) {
    out += "<line x1=\"" + num(X(*threshold)) + "\" x2=\"" + num(X(*threshold)) + "\" y1=\"" + num(kTop) + "\" y2=\"" +
           num(kTop + ph) + "\" stroke=\"" + color(3) + "\" stroke-dasharray=\"4 3\"/>";
    out += text(X(*threshold) - 4, kTop + 11, "outlier threshold", "end", "note");
  }
  out += "<rect class=\"frame\" x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(pw) + "\" height=\"" + num(ph) + "\"/>";
  return out + "</svg>";
}

std::string boxPlot(const std::vector<Box>& boxes, const std::string& yLabel, double yMin, double yMax, int width, int height) {
  if (boxes.empty()) return "<p class=\"muted\">No data.</p>";
  const Axis ya = niceAxis(yMin, yMax, 4);
  const double pw = width - kLeft - kRight, ph = height - kTop - kBottom;
  auto Y = [&](double y) { return kTop + (1 - (std::clamp(y, ya.lo, ya.hi) - ya.lo) / (ya.hi - ya.lo)) * ph; };
  std::string out = svgOpen(width, height);
  for (double y = ya.lo; y <= ya.hi + ya.step / 2; y += ya.step) {
    out += "<line class=\"grid\" x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft + pw) + "\" y1=\"" + num(Y(y)) + "\" y2=\"" + num(Y(y)) + "\"/>";
    out += text(kLeft - 6, Y(y) + 4, fmt(y), "end");
  }
  out += "<text class=\"axis\" transform=\"translate(13," + num(kTop + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
         escape(yLabel) + "</text>";
  const double slot = pw / static_cast<double>(boxes.size());
  const double bw = std::min(46.0, slot * 0.5);
  for (size_t i = 0; i < boxes.size(); ++i) {
    const Box& b = boxes[i];
    const double cx = kLeft + slot * (static_cast<double>(i) + 0.5);
    const std::string c = color(i % 10);
    out += "<line x1=\"" + num(cx) + "\" x2=\"" + num(cx) + "\" y1=\"" + num(Y(b.upper)) + "\" y2=\"" + num(Y(b.lower)) +
           "\" stroke=\"#555\"/>";
    for (double w : {b.upper, b.lower})
      out += "<line x1=\"" + num(cx - bw / 4) + "\" x2=\"" + num(cx + bw / 4) + "\" y1=\"" + num(Y(w)) + "\" y2=\"" + num(Y(w)) +
             "\" stroke=\"#555\"/>";
    out += "<rect x=\"" + num(cx - bw / 2) + "\" y=\"" + num(Y(b.p75)) + "\" width=\"" + num(bw) + "\" height=\"" +
           num(std::max(1.0, Y(b.p25) - Y(b.p75))) + "\" fill=\"" + c + "\" fill-opacity=\"0.35\" stroke=\"" + c +
           "\"><title>" + escape(b.label) + ": p25 " + fmt(b.p25) + ", median " + fmt(b.p50) + ", p75 " + fmt(b.p75) +
           "</title></rect>";
    out += "<line x1=\"" + num(cx - bw / 2) + "\" x2=\"" + num(cx + bw / 2) + "\" y1=\"" + num(Y(b.p50)) + "\" y2=\"" +
           num(Y(b.p50)) + "\" stroke=\"" + c + "\" stroke-width=\"2\"/>";
    if (b.max) out += "<circle cx=\"" + num(cx) + "\" cy=\"" + num(Y(*b.max)) + "\" r=\"2.5\" fill=\"#555\"/>";
    std::string label = b.label.size() > 18 ? b.label.substr(0, 17) + "…" : b.label;
    out += text(cx, kTop + ph + 15, label, "middle", "tick");
  }
  out += "<rect class=\"frame\" x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(pw) + "\" height=\"" + num(ph) + "\"/>";
  return out + "</svg>";
}

std::string heatmap(const std::vector<std::string>& rows, const std::vector<std::vector<std::optional<double>>>& cells,
                    double bucketSec, const std::string& unit, int width) {
  if (rows.empty()) return "<p class=\"muted\">No data.</p>";
  size_t cols = 0;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto& r : cells) {
    cols = std::max(cols, r.size());
    for (const auto& c : r)
      if (c) lo = std::min(lo, *c), hi = std::max(hi, *c);
  }
  if (cols == 0 || !std::isfinite(lo)) return "<p class=\"muted\">No data.</p>";
  const int labelW = 70, rowH = std::max(8, std::min(22, 360 / static_cast<int>(rows.size())));
  const double cw = (width - labelW - 20) / static_cast<double>(cols);
  const int h = static_cast<int>(rows.size()) * rowH + 56;
  std::string out = svgOpen(width, h);
  auto shade = [&](double v) {
    const double t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
    // light yellow (low) to dark red (high)
    const int r = static_cast<int>(255 - t * 80), g = static_cast<int>(240 - t * 200), b = static_cast<int>(200 - t * 170);
    char buf[16];
    std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
    return std::string(buf);
  };
  const bool labelEvery = rows.size() <= 24;
  for (size_t i = 0; i < rows.size(); ++i) {
    const double y = 6 + static_cast<double>(i) * rowH;
    if (labelEvery || i % (rows.size() / 12 + 1) == 0) out += text(labelW - 6, y + rowH * 0.7, rows[i], "end", "label");
    for (size_t k = 0; k < cols; ++k) {
      const std::optional<double> v = k < cells[i].size() ? cells[i][k] : std::nullopt;
      out += "<rect x=\"" + num(labelW + k * cw) + "\" y=\"" + num(y) + "\" width=\"" + num(cw + 0.3) + "\" height=\"" +
             num(rowH - 1) + "\" fill=\"" + (v ? shade(*v) : std::string("#eeeeee")) + "\">" +
             (v ? "<title>" + escape(rows[i]) + ", " + fmtDuration(k * bucketSec) + ": " + fmt(*v) + unit + "</title>" : "") +
             "</rect>";
    }
  }
  const double by = 6 + rows.size() * rowH + 14;
  out += text(labelW, by, "0", "start", "tick");
  out += text(width - 20, by, fmtDuration(cols * bucketSec), "end", "tick");
  out += text(labelW + (width - labelW - 20) / 2.0, by, "time since start →", "middle", "axis");
  // Scale
  for (int i = 0; i < 10; ++i)
    out += "<rect x=\"" + num(labelW + i * 18) + "\" y=\"" + num(by + 8) + "\" width=\"18\" height=\"9\" fill=\"" +
           shade(lo + (hi - lo) * i / 9.0) + "\"/>";
  out += text(labelW + 186, by + 17, fmt(lo) + unit + " … " + fmt(hi) + unit, "start", "note");
  return out + "</svg>";
}

}  // namespace strata::rules::report
