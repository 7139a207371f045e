#include "cli/flight/report.h"

#include <ctime>

#include <c10/util/StringUtil.h>

namespace strata::cli::flight {
namespace {

using OrderedJson = nlohmann::ordered_json;

// "2024-05-01T10:00:00.123Z" (UTC, milliseconds).
std::string isoTime(int64_t unixNs) {
  if (unixNs <= 0) return "?";
  const time_t secs = static_cast<time_t>(unixNs / 1000000000);
  struct tm utc {};
  gmtime_r(&secs, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &utc);
  char ms[8];
  std::snprintf(ms, sizeof(ms), ".%03dZ", static_cast<int>(unixNs / 1000000 % 1000));
  return std::string(text) + ms;
}

std::string rankList(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

std::string dumpLine(int rank, const RankDump& d) {
  std::string line = c10::str("  rank ", rank, ": host ", d.header.host, " pid ", d.header.pid, ", dumped on ",
                              d.header.trigger, " at ", isoTime(d.dumpUnixNs), ", ", d.entries.size(), " record(s)");
  if (d.wrapped()) line += c10::str(" (the ring wrapped: ", d.recorded - d.entries.size(), " older ones are gone)");
  return line + "\n";
}

OrderedJson findingToJson(const Finding& f) {
  OrderedJson j;
  j["kind"] = findingKindName(f.kind);
  j["group"] = f.group;
  j["seq"] = f.seq;
  j["op"] = f.op;
  j["ranks"] = f.ranks;
  j["waiting"] = f.waiting;
  j["calls"] = OrderedJson::object();
  for (const auto& [rank, call] : f.calls) j["calls"][std::to_string(rank)] = call;
  j["first_start_ns"] = f.firstStartNs;
  j["waited_s"] = f.waitedSeconds;
  j["message"] = f.message;
  return j;
}

}  // namespace

std::string formatAnalysis(const Analysis& a, const std::map<int, RankDump>& dumps, const UnreadableDumps& unreadable) {
  std::string out = c10::str("strata flight: ", dumps.size(), " of ", a.worldSize, " rank(s) dumped");
  if (!a.missing.empty()) out += c10::str(" (no dump from rank(s) ", rankList(a.missing), ")");
  out += "\n";
  for (const auto& [rank, dump] : dumps) out += dumpLine(rank, dump);
  for (const auto& [rank, why] : unreadable) out += c10::str("  rank ", rank, ": unreadable dump: ", why, "\n");
  if (a.healthy()) {
    out += "OK: the ranks agree on every operation they recorded";
    return out + (a.behind.empty() ? "\n" : " (some are a few operations behind, none held up)\n");
  }
  out += "PROBLEM: " + a.findings.front().message + "\n";
  for (const Lag& lag : a.behind)
    out += c10::str("behind: rank ", lag.rank, " by ", lag.behindBy, " op(s) in group \"", lag.group, "\" (last seq ",
                    lag.lastSeq, ")\n");
  for (size_t i = 1; i < a.findings.size(); ++i) out += "also: " + a.findings[i].message + "\n";
  return out;
}

OrderedJson analysisToJson(const Analysis& a, const std::map<int, RankDump>& dumps,
                           const UnreadableDumps& unreadable) {
  OrderedJson j;
  j["ok"] = a.healthy();
  j["world_size"] = a.worldSize;
  j["dumped"] = a.dumped;
  j["missing"] = a.missing;
  j["unreadable"] = OrderedJson::object();
  for (const auto& [rank, why] : unreadable) j["unreadable"][std::to_string(rank)] = why;
  j["verdict"] = a.healthy() ? OrderedJson(nullptr) : findingToJson(a.findings.front());
  j["findings"] = OrderedJson::array();
  for (const Finding& f : a.findings) j["findings"].push_back(findingToJson(f));
  j["behind"] = OrderedJson::array();
  for (const Lag& lag : a.behind)
    j["behind"].push_back({{"group", lag.group}, {"rank", lag.rank}, {"last_seq", lag.lastSeq},
                           {"behind_by", lag.behindBy}});
  j["dumps"] = OrderedJson::array();
  for (const auto& [rank, d] : dumps)
    j["dumps"].push_back({{"rank", rank},
                          {"host", d.header.host},
                          {"pid", d.header.pid},
                          {"trigger", d.header.trigger},
                          {"message", d.header.message},
                          {"dump_unix_ns", d.dumpUnixNs},
                          {"records", d.entries.size()},
                          {"wrapped", d.wrapped()}});
  return j;
}

}  // namespace strata::cli::flight
