#include "profiler/trace_merge.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "profiler/json_util.h"
#include "profiler/layout.h"
#include "profiler/system_monitor.h"
#include "profiler/timeline_event.h"
#include "profiler/timeline_reader.h"

namespace strata::profiler {
namespace {

bool sliceOrder(const MergedSlice& a, const MergedSlice& b) {
  if (a.pid != b.pid) return a.pid < b.pid;
  if (a.tid != b.tid) return a.tid < b.tid;
  if (a.tsUs != b.tsUs) return a.tsUs < b.tsUs;
  return a.durUs > b.durUs;  // parents before their children
}

// Places slices (sorted by sliceOrder) into lanes where they nest; returns each slice's
// lane. Lane 0 is the track itself.
std::vector<int> assignLanes(const std::vector<MergedSlice>& sorted) {
  std::vector<int> lanes(sorted.size(), 0);
  std::vector<std::vector<int64_t>> stacks;  // per lane: end times of open slices
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i == 0 || sorted[i].pid != sorted[i - 1].pid || sorted[i].tid != sorted[i - 1].tid)
      stacks.clear();
    const int64_t start = sorted[i].tsUs;
    const int64_t end = start + sorted[i].durUs;
    for (size_t lane = 0;; ++lane) {
      if (lane == stacks.size()) stacks.emplace_back();
      auto& stack = stacks[lane];
      while (!stack.empty() && stack.back() <= start) stack.pop_back();
      if (stack.empty() || end <= stack.back()) {
        stack.push_back(end);
        lanes[i] = static_cast<int>(lane);
        break;
      }
    }
  }
  return lanes;
}

struct NodeInfo {
  int pid = 0;
  std::string label;
  std::map<int, std::string> threadNames;  // tid -> name
};

void addMetadata(std::vector<nlohmann::json>& out, const char* name, int pid, int tid,
                 nlohmann::json args) {
  nlohmann::json m = {{"name", name}, {"ph", "M"}, {"pid", pid}, {"args", std::move(args)}};
  if (tid >= 0) m["tid"] = tid;
  out.push_back(std::move(m));
}

}  // namespace

size_t nestSlicesStrictly(std::vector<MergedSlice>& slices) {
  std::stable_sort(slices.begin(), slices.end(), sliceOrder);
  const std::vector<int> lanes = assignLanes(slices);
  size_t moved = 0;
  for (size_t i = 0; i < slices.size(); ++i) {
    if (lanes[i] == 0) continue;
    slices[i].tid += lanes[i] * kOverflowTidStride;
    ++moved;
  }
  if (moved > 0) std::stable_sort(slices.begin(), slices.end(), sliceOrder);
  return moved;
}

size_t countNestingViolations(const std::vector<MergedSlice>& slices) {
  std::vector<MergedSlice> sorted = slices;
  std::stable_sort(sorted.begin(), sorted.end(), sliceOrder);
  const std::vector<int> lanes = assignLanes(sorted);
  return static_cast<size_t>(std::count_if(lanes.begin(), lanes.end(), [](int l) { return l > 0; }));
}

namespace {

// Every file's parsed contents with its node, plus what is known per node.
struct RunContents {
  std::map<std::string, NodeInfo> nodes;  // raw node id -> info
  std::vector<std::pair<std::string, TraceFileContents>> files;
  int64_t baseUs = 0;  // earliest time base (or event start) of any file
};

RunContents readRun(const std::string& profilerRoot, bool includeOpenFiles, MergeReport& report) {
  RunContents run;
  int maxRank = -1;
  int64_t base = std::numeric_limits<int64_t>::max();
  for (const TraceFile& f : listTraceFiles(profilerRoot, includeOpenFiles)) {
    const auto text = readTextFile(f.path);
    if (!text) continue;
    TraceFileContents c = parseTraceText(*text, f.nodeId, f.fileType);
    ++report.files;
    report.badLines += c.badLines;
    maxRank = std::max(maxRank, rankOfNodeId(f.nodeId));
    if (c.baseUs) base = std::min(base, *c.baseUs);
    for (const TraceEvent& e : c.events) base = std::min(base, e.startUs);
    NodeInfo& node = run.nodes[f.nodeId];
    if (const auto it = c.processNames.find(0); it != c.processNames.end()) node.label = it->second;
    for (const auto& [pidTid, name] : c.threadNames) node.threadNames[pidTid.second] = name;
    run.files.emplace_back(f.nodeId, std::move(c));
  }
  run.baseUs = base == std::numeric_limits<int64_t>::max() ? 0 : base;
  int nextPid = maxRank + 1;  // nodes without a rank go after the ranks
  for (auto& [nodeId, node] : run.nodes) {
    const int rank = rankOfNodeId(nodeId);
    node.pid = rank >= 0 ? rank : nextPid++;
    if (node.label.empty() || node.label == "Unknown")
      node.label = rank >= 0 ? "rank " + std::to_string(rank) + " (" + nodeId + ")" : nodeId;
  }
  return run;
}

// Names for every process, and for every (pid, tid) a slice uses.
std::vector<nlohmann::json> buildMetadata(const std::map<std::string, NodeInfo>& nodes,
                                          const std::vector<MergedSlice>& slices) {
  std::vector<nlohmann::json> out;
  std::map<int, const NodeInfo*> byPid;
  for (const auto& [id, node] : nodes) byPid[node.pid] = &node;
  for (const auto& [pid, node] : byPid) {
    addMetadata(out, "process_name", pid, -1, {{"name", node->label}});
    addMetadata(out, "process_sort_index", pid, -1, {{"sort_index", pid}});
  }
  std::set<std::pair<int, int>> tracks;
  for (const MergedSlice& s : slices) tracks.emplace(s.pid, s.tid);
  for (const auto& [pid, tid] : tracks) {
    const int baseTid = tid % kOverflowTidStride;
    const auto& names = byPid.at(pid)->threadNames;
    const auto it = names.find(baseTid);
    std::string name = it != names.end() ? it->second : trackName(baseTid);
    if (tid >= kOverflowTidStride)
      name += " (overlap " + std::to_string(tid / kOverflowTidStride) + ")";
    addMetadata(out, "thread_name", pid, tid, {{"name", name}});
    addMetadata(out, "thread_sort_index", pid, tid, {{"sort_index", tid}});
  }
  return out;
}

}  // namespace

MergedTrace mergeTimelines(const std::string& profilerRoot, bool includeOpenFiles) {
  MergedTrace trace;
  RunContents run = readRun(profilerRoot, includeOpenFiles, trace.report);
  trace.report.baseUs = run.baseUs;
  for (auto& [nodeId, contents] : run.files) {
    const int pid = run.nodes.at(nodeId).pid;
    for (TraceEvent& e : contents.events)
      trace.slices.push_back(
          {e.name, e.phase, pid, e.tid, e.startUs - run.baseUs, e.durUs, std::move(e.args)});
  }
  trace.report.movedForNesting = nestSlicesStrictly(trace.slices);
  trace.report.slices = trace.slices.size();
  trace.report.ranks = run.nodes.size();
  trace.metadata = buildMetadata(run.nodes, trace.slices);
  return trace;
}

void writeMergedTrace(const MergedTrace& trace, std::ostream& out) {
  const auto dump = [](const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  out << "{\"traceEvents\":[\n";
  bool first = true;
  for (const nlohmann::json& m : trace.metadata) {
    out << (first ? "" : ",\n") << dump(m);
    first = false;
  }
  for (const MergedSlice& s : trace.slices) {
    nlohmann::json e = {{"name", s.name}, {"cat", s.cat}, {"ph", "X"},   {"pid", s.pid},
                        {"tid", s.tid},   {"ts", s.tsUs}, {"dur", s.durUs}, {"args", s.args}};
    out << (first ? "" : ",\n") << dump(e);
    first = false;
  }
  const nlohmann::json other = {{"start_time_since_epoch_in_micros", trace.report.baseUs},
                                {"generator", "strata trace"},
                                {"ranks", trace.report.ranks},
                                {"slices_moved_for_nesting", trace.report.movedForNesting}};
  out << "\n],\"displayTimeUnit\":\"ms\",\"otherData\":" << dump(other) << "}\n";
}

}  // namespace strata::profiler
