#include "rules/report/html_report.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "core/atomic_file.h"
#include "rules/report/rule_texts.h"
#include "rules/report/svg.h"

namespace strata::rules::report {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* kCss = R"(
:root{--fg:#1f2933;--muted:#6b7280;--line:#e3e6ea;--bg:#fff;--band:#f6f7f9;--accent:#2f6fb0}
*{box-sizing:border-box}
body{margin:0;font:14px/1.5 -apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:var(--band)}
header{background:#1f3b57;color:#fff;padding:22px 32px 18px}
header h1{margin:0;font-size:22px;font-weight:600}
header .sub{opacity:.8;font-size:13px;margin-top:4px}
nav{background:#fff;border-bottom:1px solid var(--line);padding:8px 32px;position:sticky;top:0;z-index:2}
nav a{color:var(--accent);text-decoration:none;margin-right:18px;font-size:13px}
main{max-width:1040px;margin:0 auto;padding:8px 24px 40px}
section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:6px 24px 18px;margin:18px 0}
h2{font-size:18px;margin:16px 0 8px;font-weight:600}
h3{font-size:15px;margin:20px 0 6px;font-weight:600}
p{margin:6px 0}
.muted{color:var(--muted)}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:10px 0 4px}
.card{flex:1 1 140px;background:var(--band);border:1px solid var(--line);border-radius:6px;padding:8px 12px}
.card .k{font-size:12px;color:var(--muted)}
.card .v{font-size:18px;font-weight:600}
table{border-collapse:collapse;width:100%;margin:8px 0;font-size:13px}
th,td{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
th{background:var(--band);font-weight:600;white-space:nowrap}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code,.params{font:12px/1.4 ui-monospace,Menlo,Consolas,monospace}
.params{white-space:pre;color:#374151}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;white-space:nowrap}
.IssuesFound{background:#fde8e4;color:#a2331f}
.NoIssuesFound{background:#e3f4e8;color:#23713d}
.Error{background:#5c1a14;color:#fff}
.InProgress{background:#e2edf8;color:#2f6fb0}
.rule{border-top:1px solid var(--line);padding-top:4px;margin-top:14px}
.rec{background:#f3f7fc;border-left:3px solid var(--accent);padding:6px 10px;margin:8px 0}
.note-red{color:#a2331f;font-size:13px;margin:0 0 12px}
.warn{background:#fff6e5;border-left:3px solid #e0a030;padding:6px 10px;margin:8px 0}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:4px 18px}
svg.chart{display:block;max-width:100%;height:auto;margin:6px 0 10px}
svg .grid{stroke:#edf0f3;stroke-width:1}
svg .frame{fill:none;stroke:#cfd5dc}
svg text{font-family:-apple-system,"Segoe UI",Roboto,Arial,sans-serif;fill:#4b5563}
svg .tick{font-size:11px}
svg .axis{font-size:11.5px;fill:#374151}
svg .label{font-size:12px;fill:#1f2933}
svg .value{font-size:11px;fill:#4b5563}
svg .legend{font-size:11.5px}
svg .note{font-size:11px;fill:#a2331f}
svg .inbar{font-size:11px;fill:#fff;font-weight:600}
footer{color:var(--muted);font-size:12px;text-align:center;padding:12px}
)";

// Rules that are summaries or groups, not checks.
bool isSummaryRule(const std::string& name) {
  return name == "OverallSystemUsage" || name == "OverallFrameworkMetrics" || name == "ProfilerReport";
}

double num(const json& j, const char* key, double def = std::nan("")) {
  if (!j.is_object()) return def;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : def;
}

const json& at(const json& j, const std::string& key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

std::string badge(const std::string& status) {
  const std::string s = status.empty() ? "InProgress" : status;
  return "<span class=\"badge " + escape(s) + "\">" + escape(s) + "</span>";
}

std::string utcTime(double epochSec) {
  if (std::isnan(epochSec)) return "–";
  const std::time_t t = static_cast<std::time_t>(epochSec);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

struct Report {
  const ReportInput& in;
  std::string html;
  double jobStart = std::nan("");

  const json& rule(const std::string& name) const {
    static const json kNull;
    auto it = in.rules.find(name);
    return it == in.rules.end() ? kNull : it->second;
  }
  const json& details(const std::string& name) const { return at(rule(name), "Details"); }
  void add(const std::string& s) { html += s; }

  void card(const std::string& k, const std::string& v) {
    add("<div class=\"card\"><div class=\"k\">" + escape(k) + "</div><div class=\"v\">" + escape(v) + "</div></div>");
  }

  // ---- Job summary ------------------------------------------------------------------------
  void jobSummary() {
    add("<section id=\"job\"><h2>Job summary</h2>");
    const json& d = details("MaxInitializationTime");
    double start = num(d, "job_start"), end = num(d, "job_end");
    const double fwStart = num(d, "framework_start"), fwEnd = num(d, "framework_end");
    if (!std::isnan(fwStart)) start = std::isnan(start) ? fwStart : std::min(start, fwStart);
    if (!std::isnan(fwEnd)) end = std::isnan(end) ? fwEnd : std::max(end, fwEnd);
    const json& steps = at(d, "step_num");
    const double first = num(steps, "first") / 1e6, lastStep = num(steps, "last") / 1e6;
    const double last = std::isnan(lastStep) ? first : lastStep;
    if (!std::isnan(last)) end = std::isnan(end) ? last : std::max(end, last);
    jobStart = start;
    std::vector<std::string> nodes;
    for (const auto& n : at(details("OverallSystemUsage"), "nodes")) nodes.push_back(n.get<std::string>());
    std::set<std::string> ranks;
    for (const char* src : {"OverallFrameworkMetrics", "LoadBalancing"})
      for (const auto& item : at(details(src), "ranks").items()) ranks.insert(item.key());
    if (std::isnan(start)) {
      add("<p class=\"muted\">No profiler data: the job's timeline is unknown.</p>");
    } else {
      add("<div class=\"cards\">");
      card("Job duration", fmtDuration(end - start));
      card("Initialisation", std::isnan(first) ? "no training step" : fmtDuration(first - start));
      card("Training loop", std::isnan(first) ? "–" : fmtDuration(last - first));
      card("Finalisation", std::isnan(first) ? "–" : fmtDuration(end - last));
      card("Hosts", nodes.empty() ? "–" : std::to_string(nodes.size()));
      card("Ranks", ranks.empty() ? "–" : std::to_string(ranks.size()));
      add("</div>");
      add("<table><tr><th>Start</th><td>" + utcTime(start) + "</td><th>End</th><td>" + utcTime(end) + "</td></tr>");
      add("<tr><th>First step</th><td>" + utcTime(first) + "</td><th>Last step</th><td>" + utcTime(last) + "</td></tr>");
      std::string hostList;
      for (size_t i = 0; i < nodes.size(); ++i) hostList += (i ? ", " : "") + nodes[i];
      add("<tr><th>Hosts</th><td colspan=\"3\">" + escape(hostList.empty() ? "–" : hostList) + "</td></tr></table>");
      if (!std::isnan(first)) {
        add(stackedBars({{"job", {first - start, last - first, end - last}}}, {"initialisation", "training loop", "finalisation"},
                        " s"));
        if (first - start > last - first)
          add("<p class=\"warn\">Initialisation took longer than the training loop.</p>");
      }
    }
    add("</section>");
  }

  // ---- Rules summary ----------------------------------------------------------------------
  struct Row {
    std::string name;
    const json* j;
    int64_t triggered;
  };
  std::vector<Row> checkRules() const {
    std::vector<Row> rows;
    for (const auto& [name, j] : in.rules) {
      if (isSummaryRule(name)) continue;
      rows.push_back({name, &j, at(j, "RuleTriggered").is_number() ? at(j, "RuleTriggered").get<int64_t>() : 0});
    }
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.triggered > b.triggered; });
    return rows;
  }

  void rulesSummary() {
    add("<section id=\"rules\"><h2>Rules summary</h2>");
    const auto rows = checkRules();
    if (rows.empty()) {
      add("<p class=\"muted\">No rule results in rule-output/. Run <code>strata rules RUN_DIR</code> first.</p></section>");
      return;
    }
    int issues = 0, errors = 0;
    for (const Row& r : rows) {
      const std::string s = at(*r.j, "Status").is_string() ? at(*r.j, "Status").get<std::string>() : "";
      issues += s == "IssuesFound";
      errors += s == "Error";
    }
    add("<div class=\"cards\">");
    card("Rules run", std::to_string(rows.size()));
    card("With issues", std::to_string(issues));
    card("Errors", std::to_string(errors));
    add("</div>");
    if (rows.front().triggered > 0)
      add("<p>The <b>" + escape(rows.front().name) + "</b> rule was triggered most often: " +
          std::to_string(rows.front().triggered) + (rows.front().triggered == 1 ? " time over " : " times over ") + fmt(num(*rows.front().j, "Datapoints", 0), 6) +
          " datapoints.</p>");
    else
      add("<p>No rule was triggered.</p>");
    add("<table><tr><th>Rule</th><th>Status</th><th class=\"num\">Triggered</th><th class=\"num\">Datapoints</th>"
        "<th>Analysis</th><th>Parameters</th></tr>");
    for (const Row& r : rows) {
      const std::string status = at(*r.j, "Status").is_string() ? at(*r.j, "Status").get<std::string>() : "";
      const std::string reason = at(*r.j, "StatusReason").is_string() ? at(*r.j, "StatusReason").get<std::string>() : "";
      const std::string params = at(*r.j, "RuleParameters").is_string() ? at(*r.j, "RuleParameters").get<std::string>() : "";
      add("<tr><td><a href=\"#rule-" + escape(r.name) + "\">" + escape(r.name) + "</a></td><td>" + badge(status) +
          "</td><td class=\"num\">" + std::to_string(r.triggered) + "</td><td class=\"num\">" +
          fmt(num(*r.j, "Datapoints", 0), 7) + "</td><td>" + (reason.empty() ? "<span class=\"muted\">no issue</span>" : escape(reason)) + "</td><td><div class=\"params\">" +
          escape(params) + "</div></td></tr>");
    }
    add("</table></section>");
  }

  // ---- System usage -----------------------------------------------------------------------
  void systemUsage() {
    add("<section id=\"system\"><h2>System usage per node</h2>");
    const json& d = details("OverallSystemUsage");
    if (d.is_null() || at(d, "nodes").empty()) {
      add("<p class=\"muted\">No system metrics were recorded.</p></section>");
      return;
    }
    const std::vector<std::pair<std::string, std::string>> metrics = {
        {"CPU", "%"}, {"GPU", "%"}, {"CPU memory", "%"}, {"GPU memory", "%"}, {"I/O", "%"}, {"Network", "B/s"}};
    std::vector<std::string> notes;
    add("<table><tr><th>Node</th><th>Metric</th><th>Unit</th><th class=\"num\">max</th><th class=\"num\">p99</th>"
        "<th class=\"num\">p95</th><th class=\"num\">p50</th><th class=\"num\">min</th></tr>");
    for (const auto& nodeJ : at(d, "nodes")) {
      const std::string node = nodeJ.get<std::string>();
      for (const auto& [metric, unit] : metrics) {
        const json& s = at(at(d, metric), node);
        if (s.is_null()) continue;
        add("<tr><td>" + escape(node) + "</td><td>" + escape(metric) + "</td><td>" + unit + "</td>");
        for (const char* k : {"max", "p99", "p95", "p50", "min"}) add("<td class=\"num\">" + fmt(num(s, k)) + "</td>");
        add("</tr>");
      }
      const double gpu95 = num(at(at(d, "GPU"), node), "p95"), cpu95 = num(at(at(d, "CPU"), node), "p95");
      if (!std::isnan(gpu95) && gpu95 < 70)
        notes.push_back("On " + node + " the p95 of GPU utilisation is only " + fmt(gpu95) + "%" +
                        (!std::isnan(cpu95) && cpu95 < 70 ? " and CPU utilisation is low too: the instance is larger than needed or the batch is small."
                                                          : "."));
    }
    add("</table>");
    for (const auto& n : notes) add("<p class=\"warn\">" + escape(n) + "</p>");
    const json& ts = at(d, "timeseries");
    add("<div class=\"grid2\">");
    for (const auto& [metric, unit] : metrics) {
      const json& m = at(ts, metric);
      if (m.is_null() || m.empty()) continue;
      std::vector<Series> series;
      for (const auto& item : m.items()) {
        Series s;
        s.name = item.key();
        s.x = item.value().at("t").get<std::vector<double>>();
        s.y = item.value().at("v").get<std::vector<double>>();
        series.push_back(std::move(s));
      }
      const bool pct = unit == "%";
      add("<div><h3>" + escape(metric) + "</h3>");
      add(lineChart(series, std::isnan(jobStart) ? series.front().x.front() : jobStart, metric + " (" + unit + ")",
                    pct ? std::optional<double>(0) : std::nullopt, pct ? std::optional<double>(100) : std::nullopt, 470,
                    200));
      add("</div>");
    }
    add("</div></section>");
  }

  // ---- Framework summary ------------------------------------------------------------------
  void framework() {
    add("<section id=\"framework\"><h2>Framework summary</h2>");
    const json& d = details("OverallFrameworkMetrics");
    const json& so = details("StepOutlier");
    if (d.is_null() && so.is_null()) {
      add("<p class=\"muted\">No framework timeline was recorded.</p></section>");
      return;
    }
    const json& phase = at(d, "phase");
    if (!phase.empty()) {
      add("<h3>Time per phase</h3>");
      std::vector<std::pair<std::string, double>> bars;
      for (const auto& item : phase.items()) bars.push_back({item.key(), item.value().get<double>()});
      add(hbarChart(bars, "%"));
      if (num(phase, "others", 0) > 25)
        add("<p class=\"warn\">" + fmt(num(phase, "others")) +
            "% of the time is spent outside training and evaluation steps (between steps, before the first).</p>");
    }
    stepDurations();
    const json& fb = at(d, "forward_backward");
    if (!fb.empty()) {
      add("<h3>Forward and backward passes</h3>");
      add(stackedBars({{"all ranks", {num(fb, "Forward pass", 0), num(fb, "Backward pass", 0)}}}, {"forward", "backward"}, "%"));
    }
    const json& layers = at(d, "top_layers");
    if (!layers.empty()) {
      add("<h3>Layers taking the most time</h3>");
      std::vector<StackRow> rows;
      for (const auto& l : layers) rows.push_back({l.at("name").get<std::string>(), {num(l, "forward_us", 0) / 1e3, num(l, "backward_us", 0) / 1e3}});
      add(stackedBars(rows, {"forward", "backward"}, " ms"));
    }
    const json& ranks = at(d, "ranks");
    if (!ranks.empty()) {
      add("<h3>Time per rank</h3><p class=\"muted\">Seconds over the recorded timeline. Waiting is time the training "
          "thread was blocked (exposed communication, pipeline peers); communication running in the background, "
          "overlapped with compute, is listed apart.</p>");
      std::vector<StackRow> rows;
      std::vector<std::pair<std::string, double>> overlapped;
      std::vector<std::pair<int, std::string>> order;
      for (const auto& item : ranks.items()) order.push_back({std::atoi(item.key().c_str()), item.key()});
      std::sort(order.begin(), order.end());
      for (const auto& [r, key] : order) {
        const json& j = ranks[key];
        rows.push_back({"rank " + key,
                        {num(j, "forward_s", 0), num(j, "backward_s", 0), num(j, "optimizer_s", 0), num(j, "wait_s", 0),
                         num(j, "data_s", 0)}});
        overlapped.push_back({"rank " + key, num(j, "communication_s", 0)});
      }
      add(stackedBars(rows, {"forward", "backward", "optimizer", "waiting", "data loading"}, " s"));
      bool anyComm = false;
      for (const auto& o : overlapped) anyComm |= o.second > 0;
      if (anyComm) {
        add("<p class=\"muted\">Background communication (overlapping compute)</p>");
        add(hbarChart(overlapped, " s"));
      }
    }
    for (const char* kind : {"CPU", "GPU"}) {
      const json& ops = at(d, kind);
      if (ops.empty()) continue;
      add(std::string("<h3>") + kind + " operators</h3>");
      std::vector<std::pair<std::string, double>> bars;
      for (const auto& item : ops.items()) bars.push_back({item.key(), item.value().get<double>()});
      std::sort(bars.begin(), bars.end(), [](auto& a, auto& b) { return a.second > b.second; });
      if (bars.size() > 15) bars.resize(15);
      add(hbarChart(bars, "%"));
    }
    const json& general = at(d, "general");
    if (!general.empty()) {
      add("<h3>Other framework activity</h3>");
      std::vector<std::pair<std::string, double>> bars;
      for (const auto& item : general.items()) bars.push_back({item.key(), item.value().get<double>()});
      std::sort(bars.begin(), bars.end(), [](auto& a, auto& b) { return a.second > b.second; });
      add(hbarChart(bars, "%"));
    }
    add("</section>");
  }

  void stepDurations() {
    const json& sd = at(details("StepOutlier"), "step_details");
    if (sd.empty()) return;
    add("<h3 id=\"steps\">Step durations</h3>");
    add("<table><tr><th>Node</th><th>Phase</th><th class=\"num\">steps</th><th class=\"num\">mean</th><th class=\"num\">max</th>"
        "<th class=\"num\">p99</th><th class=\"num\">p95</th><th class=\"num\">p50</th><th class=\"num\">min</th>"
        "<th class=\"num\">outliers</th></tr>");
    for (const auto& item : sd.items()) {
      const json& s = at(item.value(), "step_stats");
      add("<tr><td>" + escape(item.key()) + "</td><td>" + escape(at(item.value(), "phase").is_string() ? at(item.value(), "phase").get<std::string>() : "") +
          "</td><td class=\"num\">" + fmt(num(item.value(), "count"), 7) + "</td>");
      for (const char* k : {"mean", "max", "p99", "p95", "p50", "min"}) add("<td class=\"num\">" + fmtDuration(num(s, k)) + "</td>");
      add("<td class=\"num\">" + fmt(num(item.value(), "number_of_outliers", 0), 6) + "</td></tr>");
    }
    add("</table>");
    size_t shown = 0;
    add("<div class=\"grid2\">");
    for (const auto& item : sd.items()) {
      if (shown++ >= 8) break;
      const json& v = item.value();
      if (!at(v, "probs").is_array()) continue;
      const auto edges = v["binedges"].get<std::vector<double>>();
      add("<div><p class=\"muted\">" + escape(item.key()) + ": steps within the normal range</p>");
      add(histogram(v["probs"].get<std::vector<double>>(), edges, "step duration (s)", std::nullopt, {}, 470, 180));
      std::vector<double> outliers;
      if (at(v, "outlier_durations_s").is_array()) outliers = v["outlier_durations_s"].get<std::vector<double>>();
      const double n = num(v, "number_of_outliers", 0);
      if (n > 0) {
        std::string text = fmt(n, 6) + " outlier step(s)";
        if (!outliers.empty()) {
          const std::string lo = fmtDuration(*std::min_element(outliers.begin(), outliers.end()));
          const std::string hi = fmtDuration(*std::max_element(outliers.begin(), outliers.end()));
          text += lo == hi ? " of about " + lo : " of " + lo + " to " + hi;
        }
        if (at(v, "threshold_s").is_number()) text += ", above the threshold of " + fmtDuration(v["threshold_s"].get<double>());
        const json& steps = at(v, "step_numbers");
        if (steps.is_array() && !steps.empty()) {
          text += "; steps ";
          for (size_t i = 0; i < steps.size() && i < 8; ++i) text += (i ? ", " : "") + steps[i].dump();
          if (steps.size() > 8) text += ", …";
        }
        add("<p class=\"note-red\">" + escape(text) + "</p>");
      }
      add("</div>");
    }
    add("</div>");
    if (sd.size() > 8) add("<p class=\"muted\">Histograms of the other nodes are left out.</p>");
  }

  // ---- Heatmap ----------------------------------------------------------------------------
  void rankHeatmap() {
    add("<section id=\"heatmap\"><h2>Step time per rank</h2>");
    const json& h = at(details("LoadBalancing"), "heatmap");
    if (h.is_null() || at(h, "ranks").empty()) {
      add("<p class=\"muted\">No per-rank step times were recorded.</p></section>");
      return;
    }
    std::vector<std::string> rows;
    std::vector<std::vector<std::optional<double>>> cells;
    for (size_t i = 0; i < h["ranks"].size(); ++i) {
      rows.push_back("rank " + h["ranks"][i].dump());
      std::vector<std::optional<double>> row;
      for (const auto& c : h["step_mean_s"][i]) row.push_back(c.is_number() ? std::optional<double>(c.get<double>()) : std::nullopt);
      cells.push_back(std::move(row));
    }
    add("<p class=\"muted\">Mean step duration per rank and time bucket; a rank that is consistently darker is the "
        "straggler.</p>");
    add(heatmap(rows, cells, num(h, "bucket_us", 60e6) / 1e6, " s"));
    const json& imb = at(details("LoadBalancing"), "imbalance");
    if (!imb.is_null())
      add("<p>Spread across ranks: step time " + fmt(num(imb, "step", 0) * 100) + "%, compute per step " +
          fmt(num(imb, "compute", 0) * 100) + "%, share of the step spent waiting " + fmt(num(imb, "wait", 0) * 100) +
          " percentage points.</p>");
    add("</section>");
  }

  // ---- Per-rule analyses ------------------------------------------------------------------
  void boxes(const json& d, const std::string& yLabel) {
    std::vector<Box> bs;
    for (const auto& node : d.items()) {
      if (!node.value().is_object()) continue;
      for (const auto& dev : node.value().items()) {
        const json& b = dev.value();
        if (!b.is_object() || !b.contains("p50")) continue;
        Box x;
        x.label = node.key() + "/" + dev.key();
        x.lower = num(b, "lower");
        x.p25 = num(b, "p25");
        x.p50 = num(b, "p50");
        x.p75 = num(b, "p75");
        x.upper = num(b, "upper");
        if (b.contains("gpu_max")) x.max = num(b, "gpu_max");
        bs.push_back(x);
      }
    }
    if (bs.size() > 16) bs.resize(16);
    if (!bs.empty()) add(boxPlot(bs, yLabel, 0, 100));
  }

  void analyses() {
    add("<section id=\"analysis\"><h2>Rule analyses</h2>");
    for (const Row& r : checkRules()) {
      const json& j = *r.j;
      const json& d = at(j, "Details");
      const RuleText& t = ruleText(r.name);
      const std::string status = at(j, "Status").is_string() ? at(j, "Status").get<std::string>() : "";
      add("<div class=\"rule\" id=\"rule-" + escape(r.name) + "\"><h3>" + escape(r.name) + " " + badge(status) + "</h3>");
      add("<p>" + escape(t.description) + "</p>");
      add("<p class=\"muted\">Triggered " + std::to_string(r.triggered) + " time(s), " +
          fmt(num(j, "Violations", 0), 7) + " violation(s), " + fmt(num(j, "Datapoints", 0), 7) + " datapoints.</p>");
      if (at(j, "StatusReason").is_string() && !j["StatusReason"].get<std::string>().empty())
        add("<p><b>Analysis:</b> " + escape(j["StatusReason"].get<std::string>()) + "</p>");
      if (status == "IssuesFound" && !t.recommendation.empty())
        add("<div class=\"rec\"><b>Recommendation:</b> " + escape(t.recommendation) + "</div>");
      if (r.name == "LowGPUUtilization" || r.name == "GPUMemoryIncrease") {
        boxes(d, r.name == "LowGPUUtilization" ? "GPU utilisation (%)" : "GPU memory (%)");
      } else if (r.name == "BatchSize") {
        boxes(d, "utilisation (%)");
      } else if (r.name == "CPUBottleneck" || r.name == "IOBottleneck") {
        const double dp = num(j, "Datapoints", 0), bn = num(j, "Violations", 0), low = num(d, "low_gpu_utilization", 0);
        if (dp > 0)
          add(stackedBars({{"snapshots", {bn, std::max(0.0, low - bn), std::max(0.0, dp - std::max(low, bn))}}},
                          {r.name == "CPUBottleneck" ? "low GPU, busy CPU" : "low GPU, I/O wait", "low GPU, other cause",
                           "GPU busy"},
                          ""));
      } else if (r.name == "LoadBalancing") {
        loadBalancing(d);
      } else if (r.name == "Dataloader") {
        if (!at(d, "cores").is_null())
          add("<p>" + fmt(num(d, "cores")) + " cores; median of " + fmt(num(d, "dataloaders")) +
              " data-loading processes in parallel" +
              (at(d, "num_workers").is_null() ? std::string() : "; num_workers " + at(d, "num_workers").dump()) +
              (at(d, "pin_memory").is_null() ? std::string() : "; pin_memory " + at(d, "pin_memory").dump()) + ".</p>");
        const json& lt = at(d, "dataloading_time");
        if (at(lt, "probs").is_array())
          add(histogram(lt["probs"].get<std::vector<double>>(), lt["binedges"].get<std::vector<double>>(), "data loading time (s)"));
      } else if (r.name == "StepOutlier") {
        add("<p class=\"muted\">Step durations are shown in the <a href=\"#steps\">framework summary</a>.</p>");
      } else if (at(d, "last_violations").is_object() && !d["last_violations"].empty()) {
        add("<table><tr><th>Tensor</th><th class=\"num\">Last violation at step</th></tr>");
        size_t n = 0;
        for (const auto& item : d["last_violations"].items()) {
          if (n++ >= 12) break;
          add("<tr><td><code>" + escape(item.key()) + "</code></td><td class=\"num\">" + item.value().dump() + "</td></tr>");
        }
        add("</table>");
      }
      add("</div>");
    }
    add("</section>");
  }

  void loadBalancing(const json& d) {
    std::vector<Series> hist;
    for (const auto& node : d.items()) {
      const json& w = at(node.value(), "workloads");
      if (!w.is_object()) continue;
      for (const auto& gpu : w.items()) {
        Series s;
        s.name = node.key() + "/" + gpu.key();
        const auto counts = gpu.value().get<std::vector<double>>();
        double total = 0;
        for (double c : counts) total += c;
        for (size_t i = 0; i < counts.size(); ++i) {
          s.x.push_back(static_cast<double>(i) * 2 + 1);
          s.y.push_back(total > 0 ? counts[i] / total * 100 : 0);
        }
        hist.push_back(std::move(s));
      }
    }
    if (!hist.empty()) {
      if (hist.size() > 10) hist.resize(10);
      add("<p class=\"muted\">Distribution of GPU utilisation per GPU (share of samples per 2% bin).</p>");
      add(lineChart(hist, 0, "% of samples", 0, std::nullopt, 940, 220, "GPU utilisation (%)"));
    }
    const json& ranks = at(d, "ranks");
    if (!ranks.empty()) {
      add("<table><tr><th>Rank</th><th class=\"num\">steps</th><th class=\"num\">mean step</th><th class=\"num\">compute per step</th>"
          "<th class=\"num\">waiting</th></tr>");
      for (const auto& item : ranks.items()) {
        const json& r = item.value();
        const double steps = num(r, "steps", 0);
        const double covered = num(r, "timeline_steps", steps);  // steps the detailed timeline covers
        const double stepS = num(r, "step_s", 0);
        const double wait = num(r, "wait_s", 0) + num(r, "data_s", 0);
        add("<tr><td>" + escape(item.key()) + "</td><td class=\"num\">" + fmt(steps, 7) + "</td><td class=\"num\">" +
            fmtDuration(steps > 0 ? stepS / steps : NAN) + "</td><td class=\"num\">" +
            fmtDuration(covered > 0 ? num(r, "compute_s", 0) / covered : NAN) + "</td><td class=\"num\">" +
            fmtDuration(covered > 0 ? wait / covered : NAN) + "</td></tr>");
      }
      add("</table>");
    }
  }

  std::string render() {
    add("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
        "content=\"width=device-width, initial-scale=1\"><title>Strata profiling report</title><style>");
    add(kCss);
    add("</style></head><body><header><h1>Strata profiling report</h1><div class=\"sub\">" + escape(in.runDir) +
        (in.generatedAt.empty() ? "" : " · generated " + escape(in.generatedAt)) + "</div></header>");
    add("<nav><a href=\"#job\">Job</a><a href=\"#rules\">Rules</a><a href=\"#system\">System usage</a>"
        "<a href=\"#framework\">Framework</a><a href=\"#heatmap\">Ranks</a><a href=\"#analysis\">Analyses</a></nav><main>");
    jobSummary();
    rulesSummary();
    systemUsage();
    framework();
    rankHeatmap();
    analyses();
    add("</main><footer>Strata · rule results from rule-output/ · specs follow SageMaker Debugger's rules</footer></body></html>\n");
    return std::move(html);
  }
};

}  // namespace

ReportInput loadReportInput(const std::string& runDir) {
  ReportInput in;
  in.runDir = runDir;
  const fs::path dir = fs::path(runDir) / "rule-output";
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::end(it); it.increment(ec)) {
    const fs::path p = it->path();
    if (p.extension() != ".json") continue;
    const std::string name = p.stem().string();
    if (name == "stop_training") continue;
    std::ifstream f(p);
    json j = json::parse(f, nullptr, false);
    if (j.is_discarded()) continue;
    if (name == "summary") {
      in.summary = std::move(j);
    } else if (j.is_object() && j.contains("RuleTriggered")) {
      in.rules[name] = std::move(j);
    }
  }
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  in.generatedAt = buf;
  return in;
}

std::string renderReport(const ReportInput& input) {
  Report r{input, {}};
  return r.render();
}

std::string writeReport(const std::string& runDir) {
  const fs::path path = fs::path(runDir) / "rule-output" / "profiler-report.html";
  writeFileAtomically(path.string(), renderReport(loadReportInput(runDir)), Durability::kAtomicOnly);
  return path.string();
}

}  // namespace strata::rules::report
