// `strata flight`'s analysis on synthetic dumps: each case is a table row giving every
// rank's records and the verdict the analysis must reach (kind, group, seq, culprits).
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cli/flight/analysis.h"
#include "cli/flight/report.h"

namespace strata::cli::flight {
namespace {

constexpr int64_t kBaseNs = 1700000000000000000;  // some Unix time
constexpr int64_t kMs = 1000000;
// Dumps are written 10 s after kBaseNs: an unfinished op started near kBaseNs is held up.
constexpr int64_t kDumpNs = kBaseNs + 10000 * kMs;

// A collective record: op `seq` of group `group`, started at kBaseNs + seq ms.
DumpEntry coll(uint64_t seq, const std::string& state = "completed", uint64_t count = 1024,
               const std::string& op = "allreduce", const std::string& group = "world") {
  DumpEntry e;
  e.group = group;
  e.seq = seq;
  e.op = op;
  e.state = state;
  e.dtype = op == "barrier" ? "" : "float32";
  e.reduceOp = op == "allreduce" ? "sum" : "";
  e.count = count;
  e.numBytes = count * 4;
  e.root = op == "broadcast" ? 0 : -1;
  e.enqueueNs = e.startNs = kBaseNs + static_cast<int64_t>(seq) * kMs;
  e.endNs = state == "completed" ? e.startNs + kMs / 2 : 0;
  return e;
}

DumpEntry p2p(const std::string& op, int peer, uint64_t seq, uint64_t bytes, const std::string& state,
              const std::string& group = "pp") {
  DumpEntry e = coll(seq, state, 0, op, group);
  e.dtype.clear();
  e.peer = peer;
  e.numBytes = bytes;
  e.tag = 7;
  return e;
}

std::vector<DumpEntry> range(uint64_t first, uint64_t last, const std::string& state = "completed") {
  std::vector<DumpEntry> out;
  for (uint64_t s = first; s <= last; ++s) out.push_back(coll(s, state));
  return out;
}

std::vector<DumpEntry> operator+(std::vector<DumpEntry> a, const std::vector<DumpEntry>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Rank `rank` of `world` holding `entries`; recorded > capacity marks a wrapped ring.
RankDump dump(int rank, int world, std::vector<DumpEntry> entries, uint64_t capacity = 2000, uint64_t recorded = 0) {
  RankDump d;
  d.header.rank = rank;
  d.header.worldSize = world;
  d.header.host = "node";
  d.header.pid = 100 + rank;
  d.header.trigger = "timeout";
  d.dumpUnixNs = kDumpNs;
  d.capacity = capacity;
  d.recorded = recorded ? recorded : entries.size();
  std::vector<int> all;
  for (int r = 0; r < world; ++r) all.push_back(r);
  d.groups = {{"world", all}, {"pp", all}};
  for (size_t i = 0; i < entries.size(); ++i) entries[i].id = i + 1;
  d.entries = std::move(entries);
  return d;
}

using Dumps = std::map<int, RankDump>;

struct Case {
  const char* name;
  std::function<Dumps()> dumps;
  bool healthy;
  FindingKind kind = FindingKind::kMismatch;
  std::string group;
  uint64_t seq = 0;
  std::vector<int> culprits;
  std::string opContains;        // "" : the op must be unknown ("")
  std::vector<Lag> behind = {};  // {group, rank, lastSeq, behindBy}
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

const Case kCases[] = {
    {"Healthy", [] { return Dumps{{0, dump(0, 3, range(1, 5))}, {1, dump(1, 3, range(1, 5))}, {2, dump(2, 3, range(1, 5))}}; },
     true, FindingKind::kMismatch, "", 0, {}, ""},
    {"HangOneRankSkipped",  // ranks 0 and 2 timed out in seq 6; rank 1 never called it
     [] {
       return Dumps{{0, dump(0, 3, range(1, 5) + std::vector{coll(6, "failed")})},
                    {1, dump(1, 3, range(1, 5))},
                    {2, dump(2, 3, range(1, 5) + std::vector{coll(6, "failed")})}};
     },
     false, FindingKind::kNotArrived, "world", 6, {1}, "allreduce float32 sum count=1024 (4096 bytes)",
     {{"world", 1, 5, 1}}},
    {"MismatchOfSizes",
     [] {
       return Dumps{{0, dump(0, 3, range(1, 5) + std::vector{coll(6, "failed", 1024)})},
                    {1, dump(1, 3, range(1, 5) + std::vector{coll(6, "failed", 2048)})},
                    {2, dump(2, 3, range(1, 5) + std::vector{coll(6, "failed", 1024)})}};
     },
     false, FindingKind::kMismatch, "world", 6, {1}, "count=1024"},
    {"MismatchOfBroadcastRoot",
     [] {
       DumpEntry other = coll(2, "failed", 8, "broadcast");
       other.root = 1;
       return Dumps{{0, dump(0, 2, range(1, 1) + std::vector{coll(2, "failed", 8, "broadcast")})},
                    {1, dump(1, 2, range(1, 1) + std::vector{other})}};
     },
     false, FindingKind::kMismatch, "world", 2, {1}, "broadcast float32 count=8 root=0"},
    {"DeadRankLeftNoDump",
     [] {
       return Dumps{{0, dump(0, 3, range(1, 5) + std::vector{coll(6, "failed")})},
                    {2, dump(2, 3, range(1, 5) + std::vector{coll(6, "failed")})}};
     },
     false, FindingKind::kNoDump, "world", 6, {1}, "allreduce"},
    {"MissingDumpFileOfAHealthyRun",
     [] { return Dumps{{0, dump(0, 3, range(1, 4))}, {1, dump(1, 3, range(1, 4))}}; },
     false, FindingKind::kNoDump, "", 0, {2}, ""},
    {"RingsWrappedDifferentlyButAgree",
     [] {
       return Dumps{{0, dump(0, 2, range(96, 100), 5, 100)}, {1, dump(1, 2, range(91, 100), 10, 100)}};
     },
     true, FindingKind::kMismatch, "", 0, {}, ""},
    {"RingWrappedAndARankFarBehind",  // the others' records of seq 6 are gone
     [] {
       return Dumps{{0, dump(0, 3, range(96, 99) + std::vector{coll(100, "failed")}, 5, 100)},
                    {1, dump(1, 3, range(1, 5))},
                    {2, dump(2, 3, range(96, 99) + std::vector{coll(100, "failed")}, 5, 100)}};
     },
     false, FindingKind::kNotArrived, "world", 6, {1}, "", {{"world", 1, 5, 95}}},
    {"RunInMotionIsNotAProblem",  // rank 0 entered seq 6 a moment before the dump
     [] {
       Dumps d{{0, dump(0, 2, range(1, 5) + std::vector{coll(6, "started")})}, {1, dump(1, 2, range(1, 5))}};
       d[0].dumpUnixNs = d[1].dumpUnixNs = d[0].entries.back().startNs + kMs;
       return d;
     },
     true, FindingKind::kMismatch, "", 0, {}, "", {{"world", 1, 5, 1}}},
    {"EveryRankInItButStuck",
     [] {
       return Dumps{{0, dump(0, 2, range(1, 5) + std::vector{coll(6, "started")})},
                    {1, dump(1, 2, range(1, 5) + std::vector{coll(6, "started")})}};
     },
     false, FindingKind::kStuck, "world", 6, {}, "allreduce"},
    {"P2pReceiverWaitsForASendThatNeverCame",
     [] {
       return Dumps{{0, dump(0, 2, {p2p("send", 1, 1, 64, "completed"), p2p("send", 1, 2, 64, "completed")})},
                    {1, dump(1, 2,
                             {p2p("recv", 0, 1, 64, "completed"), p2p("recv", 0, 2, 64, "completed"),
                              p2p("recv", 0, 3, 64, "started")})}};
     },
     false, FindingKind::kP2pNotArrived, "pp", 3, {0}, "recv from rank 0 (64 bytes, tag 7)"},
    {"P2pSizesDiffer",
     [] {
       return Dumps{{0, dump(0, 2, {p2p("send", 1, 1, 4096, "failed")})},
                    {1, dump(1, 2, {p2p("recv", 0, 1, 8192, "failed")})}};
     },
     false, FindingKind::kP2pMismatch, "pp", 1, {0, 1}, "send to rank 1 (4096 bytes, tag 7)"},
    {"EagerSendWithoutReceiveIsNotAProblem",  // TCP buffers it; the receiver may come later
     [] {
       return Dumps{{0, dump(0, 2, {p2p("send", 1, 1, 64, "completed")})}, {1, dump(1, 2, {})}};
     },
     true, FindingKind::kMismatch, "", 0, {}, ""},
    {"EarliestProblemIsTheVerdict",  // the pipeline group failed first, the world group after
     [] {
       std::vector<DumpEntry> late0 = range(1, 5) + std::vector{coll(6, "failed", 1024)};
       std::vector<DumpEntry> late1 = range(1, 5) + std::vector{coll(6, "failed", 512)};
       for (auto* v : {&late0, &late1})
         for (auto& e : *v) e.startNs = e.enqueueNs = e.startNs + 5000 * kMs;
       return Dumps{{0, dump(0, 2, late0 + std::vector{p2p("send", 1, 1, 64, "completed")})},
                    {1, dump(1, 2, late1 + std::vector{p2p("recv", 0, 1, 32, "failed")})}};
     },
     false, FindingKind::kP2pMismatch, "pp", 1, {0, 1}, "send to rank 1"},
};

class FlightAnalysis : public ::testing::TestWithParam<Case> {};

TEST_P(FlightAnalysis, NamesTheFirstDisagreement) {
  const Case& c = GetParam();
  const Dumps dumps = c.dumps();
  const Analysis a = analyze(dumps);
  const std::string report = formatAnalysis(a, dumps, {});
  SCOPED_TRACE(report);
  ASSERT_EQ(a.healthy(), c.healthy);
  EXPECT_EQ(report.find(c.healthy ? "OK: " : "PROBLEM: ") != std::string::npos, true);
  std::vector<Lag> behind = a.behind;
  ASSERT_EQ(behind.size(), c.behind.size());
  for (size_t i = 0; i < behind.size(); ++i) {
    EXPECT_EQ(behind[i].group, c.behind[i].group);
    EXPECT_EQ(behind[i].rank, c.behind[i].rank);
    EXPECT_EQ(behind[i].lastSeq, c.behind[i].lastSeq);
    EXPECT_EQ(behind[i].behindBy, c.behind[i].behindBy);
  }
  if (c.healthy) return;
  const Finding& v = a.findings.front();
  EXPECT_EQ(findingKindName(v.kind), std::string(findingKindName(c.kind)));
  EXPECT_EQ(v.group, c.group);
  EXPECT_EQ(v.seq, c.seq);
  EXPECT_EQ(v.ranks, c.culprits);
  if (c.opContains.empty()) {
    EXPECT_EQ(v.op, "");
  } else {
    EXPECT_NE(v.op.find(c.opContains), std::string::npos) << v.op;
  }
  // The verdict line names the culprits.
  for (int r : c.culprits) EXPECT_NE(v.message.find(std::to_string(r)), std::string::npos) << v.message;
  const nlohmann::ordered_json j = analysisToJson(a, dumps, {});
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["verdict"]["kind"], findingKindName(c.kind));
  EXPECT_EQ(j["verdict"]["seq"], c.seq);
}

INSTANTIATE_TEST_SUITE_P(Table, FlightAnalysis, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(FlightAnalysisReport, HangVerdictReadsWell) {
  const Dumps dumps{{0, dump(0, 2, range(1, 5) + std::vector{coll(6, "failed")})}, {1, dump(1, 2, range(1, 5))}};
  const std::string text = formatAnalysis(analyze(dumps), dumps, {});
  EXPECT_NE(text.find("PROBLEM: group \"world\" seq 6 (allreduce float32 sum count=1024 (4096 bytes)): rank 1 never "
                      "arrived (last seq 5); rank 0 waited 9.99 s"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("behind: rank 1 by 1 op(s) in group \"world\" (last seq 5)"), std::string::npos) << text;
}

TEST(FlightAnalysisReport, MismatchListsEveryCall) {
  const Dumps dumps{{0, dump(0, 2, {coll(1, "failed", 10)})}, {1, dump(1, 2, {coll(1, "failed", 20)})}};
  const Analysis a = analyze(dumps);
  ASSERT_FALSE(a.healthy());
  EXPECT_EQ(a.findings.front().calls.at(0), "allreduce float32 sum count=10 (40 bytes)");
  EXPECT_EQ(a.findings.front().calls.at(1), "allreduce float32 sum count=20 (80 bytes)");
  EXPECT_NE(a.findings.front().message.find("rank 0 called allreduce float32 sum count=10"), std::string::npos);
  EXPECT_NE(a.findings.front().message.find("rank 1 called allreduce float32 sum count=20"), std::string::npos);
}

TEST(FlightAnalysisReport, WorldSizeOptionFindsRanksThatLeftNothing) {
  const Dumps dumps{{0, dump(0, 2, range(1, 3))}, {1, dump(1, 2, range(1, 3))}};
  AnalysisOptions o;
  o.worldSize = 4;
  const Analysis a = analyze(dumps, o);
  EXPECT_EQ(a.missing, (std::vector<int>{2, 3}));
  ASSERT_EQ(a.findings.size(), 2u);
  EXPECT_EQ(a.findings[0].ranks, std::vector<int>{2});
}

}  // namespace
}  // namespace strata::cli::flight
