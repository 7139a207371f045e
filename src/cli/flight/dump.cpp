#include "cli/flight/dump.h"

#include "core/errors.h"

namespace strata::cli::flight {
namespace {

using Json = nlohmann::json;
using collectives::flight::kDumpFormat;
using collectives::flight::kDumpVersion;

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

}  // namespace strata::cli::flight
