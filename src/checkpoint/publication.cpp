#include "checkpoint/publication.h"

#include <algorithm>
#include <cstring>

namespace strata::checkpoint {
namespace {

void copyText(char* out, size_t capacity, const std::string& text) {
  std::memset(out, 0, capacity);
  std::memcpy(out, text.data(), std::min(capacity - 1, text.size()));
}

}  // namespace

ShardRecord makeShardRecord(int rank, int ppRank) {
  ShardRecord r;
  r.rank = rank;
  r.ppRank = ppRank;
  return r;
}

void markWritten(ShardRecord& record, const ShardInfo& shard) {
  record.wrote = 1;
  record.bytes = shard.bytes;
  std::memset(record.sha256, 0, sizeof(record.sha256));
  std::memcpy(record.sha256, shard.sha256.data(), std::min(sizeof(record.sha256), shard.sha256.size()));
}

void markFailed(ShardRecord& record, const std::string& error) {
  record.ok = 0;
  copyText(record.error, sizeof(record.error), error.empty() ? "unknown error" : error);
}

std::string errorOf(const ShardRecord& record) {
  return std::string(record.error, strnlen(record.error, sizeof(record.error)));
}

std::string firstFailure(const std::vector<ShardRecord>& records) {
  for (size_t r = 0; r < records.size(); ++r)
    if (!records[r].ok) return "failed on rank " + std::to_string(r) + ": " + errorOf(records[r]);
  return "";
}

PublishDecision decidePublication(const std::vector<ShardRecord>& records, const ManifestHeader& header) {
  PublishDecision d;
  if (records.size() != static_cast<size_t>(header.worldSize)) {
    d.why = "expected a record from each of " + std::to_string(header.worldSize) + " ranks, got " +
            std::to_string(records.size());
    return d;
  }
  d.why = firstFailure(records);
  if (!d.why.empty()) return d;
  const bool partial = header.kind == Kind::kPartial;
  Manifest& m = d.manifest;
  m.step = header.step;
  m.epoch = header.epoch;
  m.kind = header.kind;
  m.worldSize = header.worldSize;
  m.ppSize = header.ppSize;
  m.dpSize = header.ppSize > 0 ? header.worldSize / header.ppSize : header.worldSize;
  m.createdUtc = header.createdUtc;
  for (size_t r = 0; r < records.size(); ++r) {
    const ShardRecord& rec = records[r];
    if (rec.rank != static_cast<int>(r)) {
      d.why = "the record in slot " + std::to_string(r) + " names rank " + std::to_string(rec.rank);
      return d;
    }
    const bool shouldWrite = partial || r == 0;
    if (rec.wrote != (shouldWrite ? 1 : 0)) {
      d.why = "rank " + std::to_string(r) + (shouldWrite ? " wrote no shard" : " wrote a shard of a full checkpoint");
      return d;
    }
    if (!rec.wrote) continue;
    m.shards.push_back({partial ? partialShardFile(rec.rank) : kFullShardFile, rec.rank, rec.ppRank, rec.bytes,
                        std::string(rec.sha256, sizeof(rec.sha256))});
  }
  d.publish = true;
  return d;
}

}  // namespace strata::checkpoint
