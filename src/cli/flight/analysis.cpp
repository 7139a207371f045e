#include "cli/flight/analysis.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <tuple>

#include <c10/util/StringUtil.h>

namespace strata::cli::flight {
namespace {

// One participant's records of one sequence of operations: a member's collectives in a
// group, or one direction of a point-to-point channel.
struct Track {
  int rank = 0;
  const RankDump* dump = nullptr;  // null: this rank left no dump
  std::map<uint64_t, const DumpEntry*> bySeq;
  uint64_t firstSeq = 0;  // 0 with no records
  uint64_t lastSeq = 0;

  // Whether its records say where it is: it dumped, and holds records or never wrapped
  // (a wrapped ring with none of them says nothing).
  bool known() const { return dump != nullptr && (!bySeq.empty() || !dump->wrapped()); }
  const DumpEntry* at(uint64_t seq) const {
    auto it = bySeq.find(seq);
    return it == bySeq.end() ? nullptr : it->second;
  }
};

template <typename Keep>
Track makeTrack(int rank, const std::map<int, RankDump>& dumps, Keep keep) {
  Track t;
  t.rank = rank;
  auto it = dumps.find(rank);
  if (it == dumps.end()) return t;
  t.dump = &it->second;
  for (const DumpEntry& e : it->second.entries)
    if (e.seq > 0 && keep(e)) t.bySeq[e.seq] = &e;
  if (!t.bySeq.empty()) {
    t.firstSeq = t.bySeq.begin()->first;
    t.lastSeq = t.bySeq.rbegin()->first;
  }
  return t;
}

std::string ranksText(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

std::string seconds(double s) { return c10::str(static_cast<int64_t>(s * 100 + 0.5) / 100.0, " s"); }

std::string signatureOf(const DumpEntry& e) {
  return c10::str(e.op, "|", e.dtype, "|", e.reduceOp, "|", e.count, "|", e.root);
}

bool completed(const DumpEntry& e) { return e.state == "completed"; }

// An operation a rank is held up in: failed, or still running `stuckSeconds` after it began.
bool heldUp(const DumpEntry& e, const RankDump& dump, double stuckSeconds) {
  if (e.state == "failed") return true;
  if (completed(e)) return false;
  const int64_t begin = e.startNs ? e.startNs : e.enqueueNs;
  return begin > 0 && static_cast<double>(dump.dumpUnixNs - begin) / 1e9 >= stuckSeconds;
}

int64_t earliestStart(const std::vector<const DumpEntry*>& entries) {
  int64_t first = 0;
  for (const DumpEntry* e : entries) {
    const int64_t t = e->startNs ? e->startNs : e->enqueueNs;
    if (t > 0 && (first == 0 || t < first)) first = t;
  }
  return first;
}

// From `since` to the latest dump of the given ranks.
double waitedFor(int64_t since, const std::vector<int>& ranks, const std::map<int, RankDump>& dumps) {
  double waited = 0;
  if (since <= 0) return 0;
  for (int r : ranks) {
    auto it = dumps.find(r);
    if (it != dumps.end()) waited = std::max(waited, static_cast<double>(it->second.dumpUnixNs - since) / 1e9);
  }
  return waited;
}

// The ranks that hold an operation and the records they hold, at one seq.
struct Arrivals {
  std::vector<int> ranks;
  std::vector<const DumpEntry*> entries;
  std::vector<int> heldUp;  // of ranks: failed or long running
};

Arrivals arrivalsAt(const std::vector<Track>& tracks, uint64_t seq, double stuckSeconds) {
  Arrivals a;
  for (const Track& t : tracks) {
    const DumpEntry* e = t.dump ? t.at(seq) : nullptr;
    if (e == nullptr) continue;
    a.ranks.push_back(t.rank);
    a.entries.push_back(e);
    if (heldUp(*e, *t.dump, stuckSeconds)) a.heldUp.push_back(t.rank);
  }
  return a;
}

std::optional<Finding> mismatchAt(const std::string& group, uint64_t seq, const Arrivals& a) {
  std::map<std::string, std::vector<int>> bySignature;
  for (size_t i = 0; i < a.entries.size(); ++i) bySignature[signatureOf(*a.entries[i])].push_back(a.ranks[i]);
  if (bySignature.size() < 2) return std::nullopt;
  // The most common call is taken as intended (ties: the one of the lowest rank).
  std::string common = signatureOf(*a.entries.front());
  for (const auto& [sig, ranks] : bySignature)
    if (ranks.size() > bySignature[common].size()) common = sig;
  Finding f;
  f.kind = FindingKind::kMismatch;
  f.group = group;
  f.seq = seq;
  std::string calls;
  for (size_t i = 0; i < a.entries.size(); ++i) {
    const std::string text = describeEntry(*a.entries[i]);
    f.calls[a.ranks[i]] = text;
    if (signatureOf(*a.entries[i]) == common) {
      f.op = text;
      f.waiting.push_back(a.ranks[i]);
    } else {
      f.ranks.push_back(a.ranks[i]);
    }
  }
  for (const auto& [sig, ranks] : bySignature)
    calls += c10::str(calls.empty() ? "" : "; ", ranksText(ranks), " called ", f.calls[ranks.front()]);
  f.firstStartNs = earliestStart(a.entries);
  f.message = c10::str("group \"", group, "\" seq ", seq, ": the ranks called different operations: ", calls);
  return f;
}

// A member behind the others: the first operation it missed, when the others still hold it.
std::string missedOp(const Track& behind, const std::vector<Track>& tracks, uint64_t windowStart) {
  const uint64_t missed = behind.lastSeq + 1;
  if (missed < windowStart) return "";
  for (const Track& t : tracks)
    if (const DumpEntry* e = t.dump ? t.at(missed) : nullptr) return describeEntry(*e);
  return "";
}

// The first problem of one group's collectives, from `start` to `top`.
std::optional<Finding> firstGroupProblem(const std::string& group, const std::vector<Track>& tracks, uint64_t start,
                                         uint64_t top, const std::map<int, RankDump>& dumps, double stuckSeconds) {
  for (uint64_t seq = start; seq <= top; ++seq) {
    const Arrivals a = arrivalsAt(tracks, seq, stuckSeconds);
    if (a.ranks.empty()) continue;
    if (auto f = mismatchAt(group, seq, a)) return f;
    std::vector<int> behind, noDump;
    for (const Track& t : tracks) {
      if (t.dump == nullptr) noDump.push_back(t.rank);
      else if (t.known() && t.lastSeq < seq) behind.push_back(t.rank);
    }
    // Nobody is held up at this seq: a snapshot of a run in motion, not a problem.
    if (a.heldUp.empty()) continue;
    Finding f;
    f.group = group;
    f.seq = seq;
    f.op = describeEntry(*a.entries.front());
    f.waiting = a.heldUp;
    f.firstStartNs = earliestStart(a.entries);
    f.waitedSeconds = waitedFor(f.firstStartNs, f.waiting, dumps);
    const std::string where = c10::str("group \"", group, "\" seq ", seq, " (", f.op, "): ");
    const std::string waited = c10::str(ranksText(f.waiting), " waited ", seconds(f.waitedSeconds));
    if (!behind.empty()) {
      f.kind = FindingKind::kNotArrived;
      f.ranks = behind;
      // Behind by more than the rings remember: the first missed operation is older.
      const Track* laggard = nullptr;
      for (const Track& t : tracks)
        if (t.rank == behind.front()) laggard = &t;
      f.seq = std::min(seq, laggard->lastSeq + 1);
      const std::string missed = missedOp(*laggard, tracks, start);
      f.op = missed.empty() && f.seq != seq ? "" : f.op;
      f.message = c10::str("group \"", group, "\" seq ", f.seq,
                           f.op.empty() ? " (the others' records of it are gone)" : " (" + f.op + ")", ": ",
                           ranksText(behind), " never arrived (last seq ", laggard->lastSeq, "); ", waited,
                           noDump.empty() ? "" : "; " + ranksText(noDump) + " left no dump");
    } else if (!noDump.empty()) {
      f.kind = FindingKind::kNoDump;
      f.ranks = noDump;
      f.message = c10::str(where, ranksText(noDump), " left no dump (died, was killed or could not write it); ",
                           waited);
    } else {
      f.kind = FindingKind::kStuck;
      f.message = c10::str(where, "every member entered it, but it failed or hung on ", ranksText(a.heldUp), " (",
                           seconds(f.waitedSeconds), ")");
    }
    return f;
  }
  return std::nullopt;
}

// Where a group's analysis starts: the oldest seq every member still holds.
uint64_t windowStart(const std::vector<Track>& tracks) {
  uint64_t start = 1;
  for (const Track& t : tracks)
    if (!t.bySeq.empty()) start = std::max(start, t.firstSeq);
  return start;
}

void analyzeGroup(const DumpGroup& group, const std::map<int, RankDump>& dumps, const AnalysisOptions& options,
                  Analysis& out) {
  std::vector<Track> tracks;
  for (int rank : group.ranks)
    tracks.push_back(makeTrack(rank, dumps, [&](const DumpEntry& e) { return e.group == group.name && !e.isP2p(); }));
  uint64_t top = 0;
  for (const Track& t : tracks) top = std::max(top, t.lastSeq);
  if (top == 0) return;
  for (const Track& t : tracks)
    if (t.known() && t.lastSeq < top) out.behind.push_back(Lag{group.name, t.rank, t.lastSeq, top - t.lastSeq});
  if (auto f = firstGroupProblem(group.name, tracks, windowStart(tracks), top, dumps, options.stuckSeconds))
    out.findings.push_back(*f);
}

// The first problem of the messages from sends.rank to recvs.rank in a group.
std::optional<Finding> firstChannelProblem(const std::string& group, const Track& sends, const Track& recvs,
                                           const std::map<int, RankDump>& dumps, double stuckSeconds) {
  const uint64_t top = std::max(sends.lastSeq, recvs.lastSeq);
  for (uint64_t k = windowStart({sends, recvs}); k <= top; ++k) {
    const DumpEntry* sent = sends.dump ? sends.at(k) : nullptr;
    const DumpEntry* received = recvs.dump ? recvs.at(k) : nullptr;
    Finding f;
    f.group = group;
    f.seq = k;
    const std::string where =
        c10::str("group \"", group, "\" message ", k, " from rank ", sends.rank, " to rank ", recvs.rank, ": ");
    if (sent && received) {
      if (sent->numBytes == received->numBytes && sent->tag == received->tag) continue;
      f.kind = FindingKind::kP2pMismatch;
      f.ranks = {sends.rank, recvs.rank};
      f.op = describeEntry(*sent);
      f.calls = {{sends.rank, describeEntry(*sent)}, {recvs.rank, describeEntry(*received)}};
      f.firstStartNs = earliestStart({sent, received});
      f.message = c10::str(where, "rank ", sends.rank, " sent ", sent->numBytes, " bytes with tag ", sent->tag,
                           " but rank ", recvs.rank, " expected ", received->numBytes, " bytes with tag ", received->tag);
      return f;
    }
    const DumpEntry* present = sent ? sent : received;
    const Track& holder = sent ? sends : recvs;
    const Track& other = sent ? recvs : sends;
    if (present == nullptr || !heldUp(*present, *holder.dump, stuckSeconds)) continue;
    f.op = describeEntry(*present);
    f.waiting = {holder.rank};
    f.ranks = {other.rank};
    f.firstStartNs = earliestStart({present});
    f.waitedSeconds = waitedFor(f.firstStartNs, f.waiting, dumps);
    const std::string waited = c10::str("rank ", holder.rank, " waited ", seconds(f.waitedSeconds), " in ", f.op);
    if (other.dump == nullptr) {
      f.kind = FindingKind::kNoDump;
      f.message = c10::str(where, waited, "; rank ", other.rank, " left no dump (died, was killed or could not write it)");
    } else if (other.known() && other.lastSeq < k) {
      f.kind = FindingKind::kP2pNotArrived;
      f.message = c10::str(where, waited, ", but rank ", other.rank, sent ? " never posted the receive" : " never sent it",
                           " (its last is message ", other.lastSeq, ")");
    } else {
      continue;
    }
    return f;
  }
  return std::nullopt;
}

// Every (group, sender, receiver) some dump has a message of.
std::set<std::tuple<std::string, int, int>> channelsOf(const std::map<int, RankDump>& dumps) {
  std::set<std::tuple<std::string, int, int>> channels;
  for (const auto& [rank, dump] : dumps)
    for (const DumpEntry& e : dump.entries) {
      if (e.op == "send") channels.emplace(e.group, rank, e.peer);
      if (e.op == "recv") channels.emplace(e.group, e.peer, rank);
    }
  return channels;
}

void analyzeChannels(const std::map<int, RankDump>& dumps, const AnalysisOptions& options, Analysis& out) {
  for (const auto& [group, src, dst] : channelsOf(dumps)) {
    const std::string& g = group;
    const int from = src, to = dst;
    const Track sends = makeTrack(from, dumps, [&](const DumpEntry& e) {
      return e.group == g && e.op == "send" && e.peer == to;
    });
    const Track recvs = makeTrack(to, dumps, [&](const DumpEntry& e) {
      return e.group == g && e.op == "recv" && e.peer == from;
    });
    if (auto f = firstChannelProblem(group, sends, recvs, dumps, options.stuckSeconds)) out.findings.push_back(*f);
  }
}

bool named(const std::vector<Finding>& findings, int rank) {
  for (const Finding& f : findings)
    if (std::find(f.ranks.begin(), f.ranks.end(), rank) != f.ranks.end()) return true;
  return false;
}

}  // namespace

Analysis analyze(const std::map<int, RankDump>& dumps, const AnalysisOptions& options) {
  Analysis out;
  out.worldSize = options.worldSize;
  for (const auto& [rank, dump] : dumps) out.worldSize = std::max({out.worldSize, dump.header.worldSize, rank + 1});
  for (int r = 0; r < out.worldSize; ++r) (dumps.count(r) ? out.dumped : out.missing).push_back(r);
  std::map<std::string, DumpGroup> groups;  // the first definition of each name
  for (const auto& [rank, dump] : dumps)
    for (const DumpGroup& g : dump.groups) groups.emplace(g.name, g);
  for (const auto& [name, group] : groups) analyzeGroup(group, dumps, options, out);
  analyzeChannels(dumps, options, out);
  for (int r : out.missing) {
    if (named(out.findings, r)) continue;
    Finding f;
    f.kind = FindingKind::kNoDump;
    f.ranks = {r};
    f.message = c10::str("rank ", r, " left no dump (died, was killed, could not write it, or was not asked to)");
    out.findings.push_back(f);
  }
  // Earliest first; findings of unknown time last.
  const auto when = [](const Finding& f) {
    return f.firstStartNs > 0 ? f.firstStartNs : std::numeric_limits<int64_t>::max();
  };
  std::stable_sort(out.findings.begin(), out.findings.end(), [&](const Finding& a, const Finding& b) {
    return std::make_tuple(when(a), a.group, a.seq) < std::make_tuple(when(b), b.group, b.seq);
  });
  return out;
}

const char* findingKindName(FindingKind kind) {
  switch (kind) {
    case FindingKind::kMismatch: return "mismatch";
    case FindingKind::kNotArrived: return "not_arrived";
    case FindingKind::kNoDump: return "no_dump";
    case FindingKind::kStuck: return "stuck";
    case FindingKind::kP2pMismatch: return "p2p_mismatch";
    case FindingKind::kP2pNotArrived: return "p2p_not_arrived";
  }
  return "?";
}

std::string describeEntry(const DumpEntry& e) {
  if (e.op == "send") return c10::str("send to rank ", e.peer, " (", e.numBytes, " bytes, tag ", e.tag, ")");
  if (e.op == "recv") return c10::str("recv from rank ", e.peer, " (", e.numBytes, " bytes, tag ", e.tag, ")");
  if (e.op == "barrier") return "barrier";
  std::string text = e.op + " " + e.dtype;
  if (!e.reduceOp.empty()) text += " " + e.reduceOp;
  text += c10::str(" count=", e.count);
  if (e.op == "broadcast") text += c10::str(" root=", e.root);
  return text + c10::str(" (", e.numBytes, " bytes)");
}

}  // namespace strata::cli::flight
