#include "checkpoint/async_publish.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/atomic_file.h"
#include "checkpoint/catalog.h"
#include "checkpoint/writer.h"
#include "core/errors.h"
#include "core/logging.h"

namespace strata::checkpoint {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Values of <key>/ready and <key>/outcome: "1" for success, "0<why>" for failure.
constexpr char kOk = '1';
constexpr char kFailed = '0';

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string currentError() {
  try {
    throw;
  } catch (const std::exception& e) {
    return trimmed(e.what());
  } catch (...) {
    return "unknown exception";
  }
}

void setFlag(bootstrap::Store& store, const std::string& key, const std::string& error) {
  bootstrap::setString(store, key, error.empty() ? std::string(1, kOk) : kFailed + error);
}

milliseconds remaining(Clock::time_point deadline) {
  return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

// store.get bounded by the deadline, giving up early when the job says so.
bootstrap::Bytes waitForKey(bootstrap::Store& store, const std::string& key, Clock::time_point deadline,
                            const PublishJob& job) {
  for (;;) {
    const milliseconds left = remaining(deadline);
    try {
      return store.get(key, job.abandon ? std::min(left, kAbandonCheck) : left);
    } catch (const TimeoutError&) {
      if (Clock::now() >= deadline) throw;
      if (job.abandon && job.abandon())
        STRATA_THROW(Error, "gave up waiting for ", key, ": the job failed (a rank is gone)");
    }
  }
}

// "" when the flag says success, else its error.
std::string getFlag(bootstrap::Store& store, const std::string& key, Clock::time_point deadline,
                    const PublishJob& job) {
  const bootstrap::Bytes bytes = waitForKey(store, key, deadline, job);
  const std::string value(bytes.begin(), bytes.end());
  if (!value.empty() && value[0] == kOk) return "";
  return value.size() > 1 ? value.substr(1) : "unknown error";
}

// Rank 0: waits for every rank's record (bounded by the deadline) and publishes.
std::string gatherAndCommit(bootstrap::Store& store, const PublishJob& job, const std::string& dir,
                            Clock::time_point deadline) {
  std::vector<ShardRecord> records;
  for (int r = 0; r < job.header.worldSize; ++r) {
    const std::string key = job.key + "/shard/" + std::to_string(r);
    bootstrap::Bytes bytes;
    try {
      bytes = waitForKey(store, key, deadline, job);
    } catch (...) {
      return "failed on rank " + std::to_string(r) + ": it did not report its shard within " +
             std::to_string(job.timeout.count()) + " ms (" + currentError() + ")";
    }
    if (bytes.size() != sizeof(ShardRecord))
      return "failed on rank " + std::to_string(r) + ": it sent a " + std::to_string(bytes.size()) + "-byte record";
    ShardRecord rec;
    std::memcpy(&rec, bytes.data(), sizeof(rec));
    records.push_back(rec);
  }
  ManifestHeader header = job.header;
  header.createdUtc = utcNow();
  const PublishDecision d = decidePublication(records, header);
  if (!d.publish) return d.why;
  try {
    commitManifest(dir, d.manifest);
  } catch (...) {
    return "failed on rank 0: writing the manifest: " + currentError();
  }
  for (const auto& removed : pruneCheckpoints(job.root, job.keep))
    STRATA_LOG(kDebug, kInit, "checkpoint: pruned ", removed);
  return "";
}

// This rank's shard (if it has one), as a record; never throws.
ShardRecord writeOwnShard(const PublishJob& job, const std::string& dir, const std::string& prepareError) {
  ShardRecord mine = makeShardRecord(job.rank, job.ppRank);
  if (!prepareError.empty()) {
    if (job.rank == 0) markFailed(mine, "preparing the directory: " + prepareError);
    return mine;  // rank 0's record carries the reason
  }
  if (!job.writeShard) return mine;
  try {
    const ShardInfo info = job.writeShard(dir);
    markWritten(mine, info);
  } catch (...) {
    markFailed(mine, "writing its shard: " + currentError());
  }
  return mine;
}

// Rank 0 hosts the store: its job ends (and so can its process) only after every rank read
// the outcome, so no rank is left asking a store that is gone. A rank that never reads
// (dead) delays it by the timeout at most; the outcome itself is already decided.
void awaitEveryRankRead(bootstrap::Store& store, const PublishJob& job) {
  if (job.header.worldSize <= 1) return;
  try {
    waitForKey(store, job.key + "/all-read", Clock::now() + job.timeout, job);
  } catch (const std::exception& e) {
    STRATA_LOG(kWarn, kInit, "checkpoint step ", job.header.step, ": not every rank read the outcome: ",
               trimmed(e.what()));
  }
}

}  // namespace

PublishResult publishThroughStore(bootstrap::Store& store, const PublishJob& job) {
  PublishResult result;
  result.step = job.header.step;
  result.dir = (fs::path(job.root) / checkpointDirName(job.header.step)).string();
  const auto deadline = Clock::now() + job.timeout;
  try {
    std::string prepareError;
    if (job.rank == 0) {
      try {
        makeDirectories(job.root);
        beginCheckpoint(job.root, job.header.step);
      } catch (...) {
        prepareError = currentError();
      }
      setFlag(store, job.key + "/ready", prepareError);
    } else {
      prepareError = getFlag(store, job.key + "/ready", deadline, job);
    }
    const ShardRecord mine = writeOwnShard(job, result.dir, prepareError);
    const auto* raw = reinterpret_cast<const uint8_t*>(&mine);
    store.set(job.key + "/shard/" + std::to_string(job.rank), bootstrap::Bytes(raw, raw + sizeof(mine)));
    std::string outcome;
    if (job.rank == 0) {
      outcome = gatherAndCommit(store, job, result.dir, deadline);
      setFlag(store, job.key + "/outcome", outcome);
      awaitEveryRankRead(store, job);
    } else {
      // Rank 0 may still be writing the biggest shard: the whole timeout again, as the
      // synchronous path's gather after the writes would allow.
      outcome = getFlag(store, job.key + "/outcome", Clock::now() + job.timeout, job);
      if (store.add(job.key + "/read", 1) == job.header.worldSize - 1) setFlag(store, job.key + "/all-read", "");
    }
    result.ok = outcome.empty();
    result.error = outcome;
  } catch (...) {
    result.ok = false;
    result.error = "failed on rank " + std::to_string(job.rank) + ": the background write's rendezvous: " +
                   currentError();
  }
  return result;
}

}  // namespace strata::checkpoint
