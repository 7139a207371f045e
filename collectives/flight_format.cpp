#include "collectives/flight_format.h"

#include "core/errors.h"

namespace strata::collectives::flight {
namespace {

using Json = nlohmann::json;
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

// Field readers that name the source and the field on a bad dump.
struct Reader {
  const std::string& source;

  const Json& field(const Json& obj, const char* key, const std::string& where) const {
    STRATA_CHECK(obj.is_object() && obj.contains(key), source, ": ", where, " has no \"", key, "\"");
    return obj.at(key);
  }
  int64_t integer(const Json& obj, const char* key, const std::string& where) const {
    const Json& v = field(obj, key, where);
    STRATA_CHECK(v.is_number_integer(), source, ": ", where, "/", key, " is not an integer: ", v.dump());
    return v.get<int64_t>();
  }
  uint64_t unsignedInt(const Json& obj, const char* key, const std::string& where) const {
    const Json& v = field(obj, key, where);
    STRATA_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0), source, ": ", where,
                 "/", key, " is not a non-negative integer: ", v.dump());
    return v.get<uint64_t>();
  }
  std::string text(const Json& obj, const char* key, const std::string& where) const {
    const Json& v = field(obj, key, where);
    STRATA_CHECK(v.is_string(), source, ": ", where, "/", key, " is not a string: ", v.dump());
    return v.get<std::string>();
  }
  // An optional integer (absent or null: fallback).
  int64_t optional(const Json& obj, const char* key, int64_t fallback, const std::string& where) const {
    if (!obj.contains(key) || obj.at(key).is_null()) return fallback;
    return integer(obj, key, where);
  }
  std::string optionalText(const Json& obj, const char* key) const {
    return obj.contains(key) && obj.at(key).is_string() ? obj.at(key).get<std::string>() : std::string();
  }
};

DumpEntry parseEntry(const Reader& r, const Json& j, const std::string& where) {
  DumpEntry e;
  e.id = r.unsignedInt(j, "id", where);
  e.group = r.text(j, "group", where);
  e.seq = r.unsignedInt(j, "seq", where);
  e.op = r.text(j, "op", where);
  e.state = r.text(j, "state", where);
  e.dtype = r.optionalText(j, "dtype");
  e.reduceOp = r.optionalText(j, "reduce_op");
  e.count = static_cast<uint64_t>(r.optional(j, "count", 0, where));
  e.numBytes = r.unsignedInt(j, "bytes", where);
  e.root = static_cast<int>(r.optional(j, "root", -1, where));
  e.peer = static_cast<int>(r.optional(j, "peer", -1, where));
  e.tag = static_cast<uint64_t>(r.optional(j, "tag", 0, where));
  e.enqueueNs = r.optional(j, "enqueue_ns", 0, where);
  e.startNs = r.optional(j, "start_ns", 0, where);
  e.endNs = r.optional(j, "end_ns", 0, where);
  return e;
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

RankDump parseDump(const Json& doc, const std::string& source) {
  const Reader r{source};
  STRATA_CHECK(doc.is_object(), source, ": not a JSON object");
  STRATA_CHECK(r.optionalText(doc, "format") == kDumpFormat, source, ": not a flight recorder dump (format \"",
               r.optionalText(doc, "format"), "\", expected \"", kDumpFormat, "\")");
  const int64_t version = r.integer(doc, "version", "/");
  STRATA_CHECK(version == kDumpVersion, source, ": dump version ", version, " is not supported (this strata reads ",
               kDumpVersion, ")");
  RankDump d;
  d.header.rank = static_cast<int>(r.integer(doc, "rank", "/"));
  d.header.worldSize = static_cast<int>(r.integer(doc, "world_size", "/"));
  STRATA_CHECK(d.header.worldSize >= 1 && d.header.rank >= 0 && d.header.rank < d.header.worldSize, source,
               ": rank ", d.header.rank, " is not a rank of a world of ", d.header.worldSize);
  d.header.host = r.optionalText(doc, "host");
  d.header.pid = r.optional(doc, "pid", 0, "/");
  d.header.trigger = r.optionalText(doc, "trigger");
  d.header.message = r.optionalText(doc, "message");
  d.dumpUnixNs = r.integer(r.field(doc, "clock", "/"), "dump_unix_ns", "/clock");
  d.capacity = r.unsignedInt(doc, "capacity", "/");
  d.recorded = r.unsignedInt(doc, "recorded", "/");
  for (const Json& g : r.field(doc, "groups", "/")) {
    DumpGroup group;
    group.name = r.text(g, "name", "/groups");
    for (const Json& rank : r.field(g, "ranks", "/groups/" + group.name))
      group.ranks.push_back(rank.is_number_integer() ? rank.get<int>() : -1);
    d.groups.push_back(std::move(group));
  }
  if (doc.contains("failures") && doc.at("failures").is_array())
    for (const Json& f : doc.at("failures"))
      d.failures.push_back(FailureEvent{r.optionalText(f, "trigger"), r.optionalText(f, "group"),
                                        r.optionalText(f, "op"), r.optionalText(f, "message")});
  const Json& entries = r.field(doc, "entries", "/");
  STRATA_CHECK(entries.is_array(), source, ": /entries is not an array");
  for (size_t i = 0; i < entries.size(); ++i)
    d.entries.push_back(parseEntry(r, entries[i], "/entries/" + std::to_string(i)));
  return d;
}

std::string dumpFileName(int rank) { return "rank-" + std::to_string(rank) + ".json"; }

}  // namespace strata::collectives::flight
