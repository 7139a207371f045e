// A flight recorder dump as `strata flight` reads it back (the writer's side and the format:
// collectives/flight_format.h). Pure: a parsed JSON document in, values out.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/flight_format.h"
#include "collectives/flight_recorder.h"

namespace strata::cli::flight {

using collectives::flight::DumpHeader;
using collectives::flight::FailureEvent;

// A dump as read back.
struct DumpEntry {
  uint64_t id = 0;
  std::string group;
  uint64_t seq = 0;
  std::string op;        // opName()
  std::string state;     // stateName()
  std::string dtype;     // collectives other than barrier
  std::string reduceOp;  // allreduce, reduce_scatter, reduce_scatter_shared
  uint64_t count = 0;
  uint64_t numBytes = 0;
  int root = -1;  // broadcast
  int peer = -1;  // send, recv
  uint64_t tag = 0;
  int64_t enqueueNs = 0, startNs = 0, endNs = 0;  // 0: not reached

  bool isP2p() const { return op == "send" || op == "recv"; }
};

struct DumpGroup {
  std::string name;
  std::vector<int> ranks;
};

struct RankDump {
  DumpHeader header;
  int64_t dumpUnixNs = 0;
  uint64_t capacity = 0;  // per lane (collectives/flight_recorder.h)
  uint64_t recorded = 0;  // every lane's records ever made
  std::vector<DumpGroup> groups;
  std::vector<FailureEvent> failures;
  std::vector<DumpEntry> entries;

  // The oldest records are gone (more were made than the dump holds).
  bool wrapped() const { return recorded > entries.size(); }
};

// Parses one dump. Throws strata::Error naming `source` and the field at fault.
RankDump parseDump(const nlohmann::json& doc, const std::string& source);

}  // namespace strata::cli::flight
