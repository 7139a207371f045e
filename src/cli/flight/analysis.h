// `strata flight`'s analysis: every rank's flight recorder dump merged, to name the first
// operation where the ranks parted ways. Pure: parsed dumps in, findings out (tested on
// tables of synthetic dumps in tests/cli/flight/analysis_test.cpp).
//
// Matching: a collective is identified by (group, seq), the group's sequence number, equal
// on every member; a point-to-point message by (group, sender, receiver, n), the n-th
// send of the sender to the receiver matching the n-th receive the other way (TCP keeps
// them in order). For each group, from the oldest seq every member still holds (rings
// wrap) to the newest any member reached, the first seq where
//   * members called different operations (op, dtype, reduce op, count or root)  -> mismatch
//   * some members are in it and others' last operation is older                 -> not_arrived
//   * some members are in it and others left no dump (died, were killed)         -> no_dump
//   * every member is in it and it failed, or has been running a long time       -> stuck
// ends that group's analysis (later operations only echo the first problem). Channels of
// point-to-point messages give p2p_mismatch and p2p_not_arrived the same way. Findings are
// ordered by when their operation began; the first is the verdict.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cli/flight/dump.h"

namespace strata::cli::flight {

enum class FindingKind { kMismatch, kNotArrived, kNoDump, kStuck, kP2pMismatch, kP2pNotArrived };
const char* findingKindName(FindingKind kind);  // "mismatch", "not_arrived", ...

struct Finding {
  FindingKind kind = FindingKind::kMismatch;
  std::string group;  // "" for a rank that left no dump and is in no other finding
  uint64_t seq = 0;   // collective: the group's seq; p2p: the message's number on its channel
  std::string op;     // the operation, as the ranks that reached it called it ("" if unknown)
  std::vector<int> ranks;    // the culprits: those that differ, never arrived, left no dump
  std::vector<int> waiting;  // ranks that were in the operation
  std::map<int, std::string> calls;  // mismatch: what each rank called
  int64_t firstStartNs = 0;  // when the first rank entered it (0: unknown)
  double waitedSeconds = 0;  // from then to the last dump of a waiting rank
  std::string message;       // one sentence with the numbers
};

// A member whose last operation in a group is older than the group's newest.
struct Lag {
  std::string group;
  int rank = 0;
  uint64_t lastSeq = 0;
  uint64_t behindBy = 0;  // operations
};

struct AnalysisOptions {
  int worldSize = 0;          // 0: the largest world_size the dumps give
  double stuckSeconds = 1.0;  // an operation every member is in counts as stuck after this
};

struct Analysis {
  int worldSize = 0;
  std::vector<int> dumped;   // ranks with a dump
  std::vector<int> missing;  // ranks without one
  std::vector<Finding> findings;  // the first is the verdict; empty: healthy
  std::vector<Lag> behind;
  bool healthy() const { return findings.empty(); }
};

Analysis analyze(const std::map<int, RankDump>& dumps, const AnalysisOptions& options = {});

// "allreduce float32 sum count=1024 (4096 bytes)", "send to rank 1 (64 bytes, tag 7)".
std::string describeEntry(const DumpEntry& entry);

}  // namespace strata::cli::flight
