// The flight recorder's dump file: one JSON document per rank,
// <output_dir>/flight/rank-<r>.json, written by the runtime (src/runtime/flight.h) and read
// by `strata flight` (src/cli/flight/dump.h; docs/flight_recorder.md has the full field
// list). Pure: values in, values out; no files here.
//
//   {"format": "strata.flight_recorder", "version": 1,
//    "rank": 0, "world_size": 3, "host": "node1", "pid": 4121,
//    "trigger": "timeout", "message": "...",           // why this dump was written
//    "clock": {"source": "tsc", "ticks_per_ns": 2.9, "dump_unix_ns": ..., "dump_steady_ns": ...},
//    "capacity": 2000, "recorded": 7412,               // recorded > capacity: the ring wrapped
//    "groups": [{"name": "world", "ranks": [0, 1, 2], "group_rank": 0}],
//    "failures": [{"trigger": "timeout", "group": "world", "op": "...", "message": "..."}],
//    "entries": [{"id": 7412, "group": "world", "seq": 6, "op": "allreduce", "state": "failed",
//                 "dtype": "float32", "reduce_op": "sum", "count": 1024, "bytes": 4096,
//                 "enqueue_ns": ..., "start_ns": ..., "end_ns": ...}, ...]}
//
// Entries are oldest first. Ranks (root, peer, group members) are world ranks; times are
// Unix nanoseconds, null when the state was not reached.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "collectives/flight_recorder.h"

namespace strata::collectives::flight {

inline constexpr const char* kDumpFormat = "strata.flight_recorder";
inline constexpr int kDumpVersion = 1;

// Who wrote a dump, and why.
struct DumpHeader {
  int rank = 0;
  int worldSize = 1;
  std::string host;
  int64_t pid = 0;
  std::string trigger;  // "timeout" | "mismatch" | "network" | "error" | "signal" | "finalize" | "request"
  std::string message;
};

// The dump document (keys in the order above).
nlohmann::ordered_json dumpToJson(const Snapshot& snapshot, const DumpHeader& header);
// Its text: one line per top-level key and one per entry (readable, and diffable).
std::string dumpText(const nlohmann::ordered_json& doc);

// "rank-3.json", the file name of rank 3's dump.
std::string dumpFileName(int rank);

}  // namespace strata::collectives::flight
