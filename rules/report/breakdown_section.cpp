#include "rules/report/breakdown_section.h"

#include <cmath>

#include "rules/report/svg.h"

namespace strata::rules::report {
namespace {

using json = nlohmann::json;

double num(const json& j, const char* key, double def = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : def;
}

std::string rankLabel(const json& r) {
  std::string label = "rank " + std::to_string(r.value("rank", -1));
  const json stages = r.value("stages", json::array());
  if (stages.is_array() && !stages.empty()) {
    label += stages.size() == 1 ? " (stage " : " (stages ";
    for (size_t i = 0; i < stages.size(); ++i) label += (i ? "," : "") + std::to_string(stages[i].get<int>());
    label += ")";
  }
  return label;
}

std::string verdicts(const json& b) {
  std::string out;
  const json stragglers = b.value("stragglers", json::array());
  for (const json& s : stragglers)
    out += "<p class=\"warn\"><b>Straggler:</b> " + escape(s.value("evidence", "")) + "</p>";
  if (b.contains("slow_stage"))
    out += "<p class=\"warn\"><b>Slow stage:</b> " + escape(b.at("slow_stage").value("evidence", "")) + "</p>";
  if (out.empty())
    out = "<p>No straggler: no rank's compute per step stands out from the ranks doing the same work" +
          std::string(b.value("layout", "") == "data parallel" ? "" : ", and no pipeline stage stands out") + ".</p>";
  return out;
}

}  // namespace

const char* breakdownColor(int timeClass) { return color(static_cast<size_t>(timeClass)); }

std::string renderBreakdownSection(const json& b) {
  std::string out = "<section id=\"breakdown\"><h2>Where the time went, per rank</h2>";
  if (!b.is_object() || !b.contains("ranks") || b.at("ranks").empty()) {
    return out +
           "<p class=\"muted\">No framework timeline: the profiler records one inside its framework_profile "
           "window.</p></section>";
  }
  out += "<p>" + escape(b.value("layout", "")) + " run, " + std::to_string(b.at("ranks").size()) +
         " rank(s), over the steps of the framework timeline. Each instant of a rank counts once: compute first, "
         "then communication that compute did not hide, then waiting for a pipeline peer, then data loading; "
         "the rest is idle.</p>";
  std::vector<StackRow> rows;
  std::vector<std::pair<std::string, double>> overlap;
  std::vector<Series> perStep;
  for (const json& r : b.at("ranks")) {
    const double period = num(r, "period_s");
    auto pct = [&](const char* key) { return period > 0 ? 100 * num(r, key) / period : 0.0; };
    rows.push_back({rankLabel(r),
                    {pct("compute_s"), pct("exposed_comm_s"), pct("pipeline_wait_s"), pct("data_loading_s"),
                     pct("idle_s")}});
    if (r.contains("overlap_percent")) overlap.emplace_back(rankLabel(r), num(r, "overlap_percent"));
    // One series per rank and mode (TRAIN and EVAL steps are numbered apart).
    const json byMode = r.value("compute_ms_by_step", json::object());
    for (const auto& mode : byMode.items()) {
      if (!mode.value().is_object()) continue;
      Series s;
      s.name = mode.key() == "TRAIN" || mode.key().empty() ? rankLabel(r) : rankLabel(r) + " " + mode.key();
      for (const auto& item : mode.value().items()) {
        s.x.push_back(std::stod(item.key()));
        s.y.push_back(item.value().get<double>());
      }
      if (!s.x.empty()) perStep.push_back(std::move(s));
    }
  }
  out += "<h3>Time per rank</h3>";
  out += stackedBars(rows, {"compute", "exposed communication", "pipeline wait", "data loading", "idle"}, "%");
  out += verdicts(b);
  out += "<h3>Communication hidden by compute</h3>";
  if (overlap.empty()) {
    out += "<p class=\"muted\">No communication slices (AllReduce buckets, pipeline sends) in the timeline.</p>";
  } else {
    out += "<p class=\"muted\">Share of each rank's communication time that ran while it computed (higher is "
           "better).</p>";
    out += hbarChart(overlap, "%");
  }
  if (!perStep.empty()) {
    out += "<h3>Compute per step</h3>";
    if (perStep.size() > 10) perStep.resize(10);
    out += lineChart(perStep, 0, "ms", 0.0, std::nullopt, 940, 220, "step");
  }
  return out + "</section>";
}

}  // namespace strata::rules::report
