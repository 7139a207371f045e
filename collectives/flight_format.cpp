#include "collectives/flight_format.h"

namespace strata::collectives::flight {
namespace {

using OrderedJson = nlohmann::ordered_json;

bool isCollective(Op op) { return op != Op::kSend && op != Op::kRecv; }

OrderedJson timeOrNull(const ClockInfo& clock, uint64_t ticks) {
  return ticks == 0 ? OrderedJson(nullptr) : OrderedJson(clock.unixNs(ticks));
}

int worldRankOf(const GroupInfo* group, int groupRank) {
  if (group == nullptr || groupRank < 0 || groupRank >= static_cast<int>(group->worldRanks.size())) return groupRank;
  return group->worldRanks[static_cast<size_t>(groupRank)];
}

OrderedJson entryToJson(const Entry& e, const Snapshot& snap) {
  const GroupInfo* group = e.info.group < snap.groups.size() ? &snap.groups[e.info.group] : nullptr;
  OrderedJson j;
  j["id"] = e.id;
  if (e.lane != 0) j["lane"] = e.lane;  // a communicator's own lane (ids count per lane)
  j["group"] = group ? group->name : "?";
  j["seq"] = e.info.seq;
  j["op"] = opName(e.info.op);
  j["state"] = stateName(e.state);
  if (isCollective(e.info.op) && e.info.op != Op::kBarrier) j["dtype"] = dtypeName(e.info.dtype);
  if (e.info.op == Op::kAllReduce || e.info.op == Op::kReduceScatter || e.info.op == Op::kReduceScatterShared)
    j["reduce_op"] = reduceOpName(e.info.reduceOp);
  if (isCollective(e.info.op)) j["count"] = e.info.count;
  j["bytes"] = e.info.numBytes;
  if (e.info.op == Op::kBroadcast) j["root"] = worldRankOf(group, e.info.peer);
  if (!isCollective(e.info.op)) {
    j["peer"] = worldRankOf(group, e.info.peer);
    j["tag"] = e.info.tag;
  }
  j["enqueue_ns"] = timeOrNull(snap.clock, e.enqueueTicks);
  j["start_ns"] = timeOrNull(snap.clock, e.startTicks);
  j["end_ns"] = timeOrNull(snap.clock, e.endTicks);
  return j;
}

}  // namespace

OrderedJson dumpToJson(const Snapshot& snap, const DumpHeader& header) {
  OrderedJson doc;
  doc["format"] = kDumpFormat;
  doc["version"] = kDumpVersion;
  doc["rank"] = header.rank;
  doc["world_size"] = header.worldSize;
  doc["host"] = header.host;
  doc["pid"] = header.pid;
  doc["trigger"] = header.trigger;
  doc["message"] = header.message;
  doc["clock"] = {{"source", snap.clock.source},
                  {"resolution_ns", snap.clock.resolutionNs},
                  {"ticks_per_ns", snap.clock.ticksPerNs},
                  {"dump_unix_ns", snap.clock.nowUnixNs},
                  {"dump_steady_ns", snap.clock.nowSteadyNs}};
  doc["capacity"] = snap.capacity;
  doc["recorded"] = snap.recorded;
  doc["groups"] = OrderedJson::array();
  for (const GroupInfo& g : snap.groups)
    doc["groups"].push_back({{"name", g.name}, {"ranks", g.worldRanks}, {"group_rank", g.groupRank}});
  doc["failures"] = OrderedJson::array();
  for (const FailureEvent& f : snap.failures)
    doc["failures"].push_back({{"trigger", f.trigger}, {"group", f.group}, {"op", f.op}, {"message", f.message}});
  doc["entries"] = OrderedJson::array();
  for (const Entry& e : snap.entries) doc["entries"].push_back(entryToJson(e, snap));
  return doc;
}

std::string dumpText(const OrderedJson& doc) {
  std::string out = "{\n";
  bool firstKey = true;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    out += firstKey ? "" : ",\n";
    firstKey = false;
    out += "  " + OrderedJson(it.key()).dump() + ": ";
    if (it.key() != "entries" || it.value().empty()) {
      out += it.value().dump();
      continue;
    }
    out += "[\n";
    for (size_t i = 0; i < it.value().size(); ++i) out += (i ? ",\n    " : "    ") + it.value()[i].dump();
    out += "\n  ]";
  }
  return out + "\n}\n";
}

std::string dumpFileName(int rank) { return "rank-" + std::to_string(rank) + ".json"; }

}  // namespace strata::collectives::flight
