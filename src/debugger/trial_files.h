// The JSON files of a trial: the per-(step, worker) index and the per-worker collections
// file (specs/smdebug.md §1.4, §1.5, §8.2, §8.5, §8.8). Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "debugger/collections.h"
#include "debugger/types.h"

namespace strata::debugger {

struct IndexEntry {
  std::string tensorName;
  uint64_t startIdx = 0;  // byte offset of the record in the event file
  uint64_t length = 0;    // whole record bytes: 16 + payload
};

struct ShapeEntry {
  std::string tensorName;
  std::string originalName;
  std::vector<int64_t> shape;
};

// One index file. meta applies to every tensor in it (one mode per file).
struct IndexFile {
  Mode mode = Mode::kGlobal;
  int64_t modeStep = 0;
  std::string eventFileName;  // relative to the trial: events/<step12>/<step12>_<worker>.tfevents
  std::vector<IndexEntry> tensors;
  std::vector<ShapeEntry> shapes;  // never holds a tensor that is also in `tensors`
};

// {"meta": {"mode": "TRAIN", "mode_step": 3, "event_file_name": ...},
//  "tensor_payload": [...], "shape_payload": [...]}, keys in smdebug's order.
std::string indexFileJson(const IndexFile& index);
// Parses an index file (ours or smdebug's). False with *error for invalid JSON, a missing or
// empty meta, an unknown mode, or a missing tensor_payload (smdebug's _validate).
bool parseIndexFile(const std::string& text, IndexFile* out, std::string* error);

// {"collections": {...}, "_meta": {"num_workers": N}}; exactly those two top-level keys.
std::string collectionsFileJson(const std::vector<Collection>& collections, int numWorkers);

struct CollectionsFile {
  int numWorkers = 1;
  struct Entry {
    std::vector<std::string> includeRegex;
    std::vector<std::string> tensorNames;
  };
  std::map<std::string, Entry> collections;
};
bool parseCollectionsFile(const std::string& text, CollectionsFile* out, std::string* error);

}  // namespace strata::debugger
