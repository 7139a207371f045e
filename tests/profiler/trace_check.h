// What Perfetto / chrome://tracing need from a Chrome-trace JSON file, checked with
// nlohmann_json (neither viewer is installable here): every event has ph/pid/name;
// X events have integer µs ts and dur >= 0 and a tid; every pid used by an X event has a
// process_name and every (pid, tid) a thread_name; slices on one (pid, tid) nest strictly.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "profiler/trace_merge.h"  // MergedSlice

namespace strata::profiler::testing {

// Empty when valid; otherwise one message per problem.
inline std::vector<std::string> perfettoProblems(const nlohmann::json& trace) {
  std::vector<std::string> problems;
  const nlohmann::json& events = trace.is_object() ? trace.at("traceEvents") : trace;
  if (!events.is_array()) return {"not an array of events"};
  std::set<int> namedPids;
  std::set<std::pair<int, int>> namedThreads;
  std::vector<MergedSlice> slices;
  for (const auto& e : events) {
    if (!e.contains("ph") || !e.contains("pid") || !e.contains("name")) {
      problems.push_back("event without ph/pid/name: " + e.dump());
      continue;
    }
    const std::string ph = e["ph"];
    const int pid = e["pid"];
    if (ph == "M") {
      if (e["name"] == "process_name" && e["args"].contains("name")) namedPids.insert(pid);
      if (e["name"] == "thread_name") namedThreads.emplace(pid, e.at("tid").get<int>());
    } else if (ph == "X") {
      if (!e["ts"].is_number_integer() || !e["dur"].is_number_integer() || e["dur"] < 0 ||
          !e.contains("tid"))
        problems.push_back("bad X event: " + e.dump());
      else
        slices.push_back({e["name"], "", pid, e["tid"], e["ts"], e["dur"], {}});
    } else {
      problems.push_back("unexpected phase " + ph);
    }
  }
  for (const auto& s : slices) {
    if (!namedPids.count(s.pid)) problems.push_back("pid without process_name: " + std::to_string(s.pid));
    if (!namedThreads.count({s.pid, s.tid}))
      problems.push_back("tid without thread_name: " + std::to_string(s.pid) + "/" + std::to_string(s.tid));
  }
  // Independent of the production nesting code: every two slices on one track are
  // disjoint or one contains the other (touching ends are fine).
  for (size_t i = 0; i < slices.size(); ++i) {
    for (size_t j = i + 1; j < slices.size(); ++j) {
      const MergedSlice& a = slices[i];
      const MergedSlice& b = slices[j];
      if (a.pid != b.pid || a.tid != b.tid) continue;
      const int64_t aEnd = a.tsUs + a.durUs, bEnd = b.tsUs + b.durUs;
      const bool disjoint = aEnd <= b.tsUs || bEnd <= a.tsUs;
      const bool nested = (a.tsUs <= b.tsUs && bEnd <= aEnd) || (b.tsUs <= a.tsUs && aEnd <= bEnd);
      if (!disjoint && !nested)
        problems.push_back("slices overlap on " + std::to_string(a.pid) + "/" +
                           std::to_string(a.tid) + ": " + a.name + " and " + b.name);
    }
  }
  return problems;
}

}  // namespace strata::profiler::testing
