#include "adapter/checkpoint/checkpoint_async.h"

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>

#include "adapter/ops/agreement.h"
#include "bootstrap/store.h"
#include "collectives/communicator.h"
#include "checkpoint/manifest.h"
#include "core/errors.h"
#include "core/logging.h"
#include "profiler/session.h"
#include "runtime/runtime_internal.h"
#include "strata/runtime.h"

namespace strata::detail {
namespace {

namespace ck = strata::checkpoint;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Store keys of one background save: every rank numbers its saves the same way (saves are
// collective), so the n-th save of every rank meets under the same key.
std::atomic<uint64_t> nextSaveNumber{0};

std::mutex hookMu;
std::shared_ptr<BackgroundWriteHook> hook;

std::shared_ptr<BackgroundWriteHook> currentHook() {
  std::lock_guard<std::mutex> lock(hookMu);
  return hook;
}

// Runs on the checkpoint thread: writes this rank's shard, publishes with the other ranks,
// logs the outcome. Never throws (publishThroughStore does not).
ck::PublishResult runJob(const std::shared_ptr<bootstrap::Store>& store, const ck::PublishJob& job) {
  const auto start = Clock::now();
  ck::PublishResult r = ck::publishThroughStore(*store, job);
  if (r.ok) {
    STRATA_LOG(kInfo, kInit, "checkpoint saved: ", r.dir, " (", ck::kindName(job.header.kind), ", step ", r.step,
               ", written in the background in ", static_cast<int64_t>(msSince(start)), " ms)");
  } else {
    STRATA_LOG(kError, kInit, "checkpoint ", r.dir, " (step ", r.step, ", written in the background) ", r.error,
               "; it is not published, the previous complete checkpoint stays the newest");
  }
  return r;
}

}  // namespace

void TEST_setBackgroundWriteHook(BackgroundWriteHook fn) {
  std::lock_guard<std::mutex> lock(hookMu);
  hook = fn ? std::make_shared<BackgroundWriteHook>(std::move(fn)) : nullptr;
}

AsyncCheckpointer::~AsyncCheckpointer() { shutdown(); }

std::string AsyncCheckpointer::collectPrevious(double* waitedMs, bool bySave) {
  const auto start = Clock::now();
  const int64_t inFlight = writer_.stepInFlight();
  std::optional<profiler::ScopedSlice> slice;  // the wait on the profiler's checkpoint track
  if (inFlight >= 0) {
    slice.emplace("wait for the previous write", profiler::phases::kCheckpoint, profiler::Track::kCheckpoint);
    {
      std::lock_guard<std::mutex> lock(statsMu_);
      stats_.waiting = true;
    }
    STRATA_LOG(kInfo, kInit, "checkpoint: waiting for the background write of step ", inFlight);
  }
  const std::optional<ck::PublishResult> r = writer_.wait();
  *waitedMs = inFlight >= 0 ? msSince(start) : 0.0;
  {
    std::lock_guard<std::mutex> lock(statsMu_);
    stats_.waiting = false;
    if (inFlight >= 0 && bySave) ++stats_.waitedSaves;
  }
  if (!r || r->ok) return "";
  return "checkpoint " + r->dir + " (step " + std::to_string(r->step) + ", written in the background) " + r->error;
}

void AsyncCheckpointer::wait() {
  double waitedMs = 0;
  const std::string error = collectPrevious(&waitedMs, /*bySave=*/false);
  failedUnreported_ = false;  // reported now, by the throw below
  const std::string failure = adapter::agreeOnError(error.empty(), error);
  STRATA_CHECK(failure.empty(), failure);
}

std::string AsyncCheckpointer::save(const AsyncSaveRequest& request, DistributedModel& model,
                                    DistributedOptimizer& optimizer) {
  STRATA_CHECK(request.partial || model.pp_size() == 1, "checkpoint: a full checkpoint of a ", model.pp_size(),
               "-stage pipeline is written at the step boundary (strata::save), not in the background");
  const auto start = Clock::now();
  double waitedMs = 0;
  const std::string previousError = collectPrevious(&waitedMs, /*bySave=*/true);
  failedUnreported_ = false;
  const std::string failure = adapter::agreeOnError(previousError.empty(), previousError);
  STRATA_CHECK(failure.empty(), failure);

  const auto snapshotStart = Clock::now();
  const int rank = world().rank();
  const bool writesShard = request.partial || rank == 0;
  ShardContent content;
  std::string snapshotError;
  {
    profiler::ScopedSlice slice("snapshot", profiler::phases::kCheckpoint, profiler::Track::kCheckpoint);
    const ShardContent live =
        captureLive(model, optimizer, request.sampler, request.step, request.epoch, request.partial);
    try {
      if (writesShard) content = snapshot_.take(live, model, optimizer);
    } catch (const std::exception& e) {
      snapshotError = adapter::trimmed(e.what());
    }
  }
  // Every rank starts the write, or none does (a rank that cannot copy its state, out of
  // memory say, must not leave the others waiting for its shard).
  adapter::agreeOrThrow(snapshotError.empty(), snapshotError,
               "checkpoint step " + std::to_string(request.step) + ": copying the state");
  const double snapshotMs = msSince(snapshotStart);

  ck::PublishJob job;
  job.root = request.root;
  job.header.step = request.step;
  job.header.epoch = request.epoch;
  job.header.kind = request.partial ? ck::Kind::kPartial : ck::Kind::kFull;
  job.header.worldSize = world().size();
  job.header.ppSize = model.pp_size();
  job.rank = rank;
  job.ppRank = model.pp_rank();
  job.keep = request.keep;
  job.key = "ckpt/async/" + std::to_string(nextSaveNumber.fetch_add(1));
  job.timeout = runtime::waitTimeout();
  // A dead peer fails the world group (the training thread's next collective notices): the
  // checkpoint thread then stops waiting for that peer's report instead of the full timeout.
  collectives::Communicator* comm = &world().communicator();
  job.abandon = [comm] { return comm->failed(); };
  if (writesShard) {
    const std::string file = request.partial ? ck::partialShardFile(rank) : ck::kFullShardFile;
    const std::shared_ptr<BackgroundWriteHook> testHook = currentHook();
    const int64_t step = request.step;
    job.writeShard = [content, file, testHook, step, rank](const std::string& dir) {
      WriteProgress progress;
      if (testHook) progress = [&](uint64_t bytes) { (*testHook)(step, rank, bytes); };
      return writeShardContent(dir, file, content, progress);
    };
  }
  std::shared_ptr<bootstrap::Store> store = runtime::rendezvousStore();
  writer_.submit([store, job] { return runJob(store, job); }, request.step);
  pendingDir_ = (fs::path(request.root) / ck::checkpointDirName(request.step)).string();

  const double stallMs = msSince(start);
  {
    std::lock_guard<std::mutex> lock(statsMu_);
    ++stats_.saves;
    ++stats_.backgroundSaves;
    stats_.lastWaitMs = waitedMs;
    stats_.lastSnapshotMs = snapshotMs;
    stats_.lastStallMs = stallMs;
    stats_.totalWaitMs += waitedMs;
    stats_.totalStallMs += stallMs;
    stats_.maxStallMs = std::max(stats_.maxStallMs, stallMs);
    stats_.snapshotBytes = snapshot_.bytes();
  }
  STRATA_LOG(kInfo, kInit, "checkpoint step ", request.step, ": ", snapshot_.bytes(), " bytes copied in ",
             static_cast<int64_t>(snapshotMs), " ms (training stalled ", static_cast<int64_t>(stallMs),
             " ms, of which ", static_cast<int64_t>(waitedMs), " ms waiting for the previous write); writing ",
             pendingDir_, " in the background");
  return pendingDir_;
}

void AsyncCheckpointer::settle() noexcept {
  try {
    double waitedMs = 0;
    const std::string error = collectPrevious(&waitedMs, /*bySave=*/false);
    if (error.empty()) return;
    failedUnreported_ = true;
    STRATA_LOG(kError, kInit, error, " (found at the end of training; the job did not save its last checkpoint)");
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kInit, "checkpoint: waiting for the background write: ", e.what());
  }
}

void AsyncCheckpointer::shutdown() noexcept {
  settle();
  writer_.shutdown();
}

CheckpointStats AsyncCheckpointer::stats() const {
  std::lock_guard<std::mutex> lock(statsMu_);
  CheckpointStats s = stats_;
  s.inFlightStep = writer_.stepInFlight();  // live: -1 as soon as the write ended
  return s;
}

void AsyncCheckpointer::recordSynchronousSave(double stallMs) {
  std::lock_guard<std::mutex> lock(statsMu_);
  ++stats_.saves;
  stats_.lastWaitMs = 0;
  stats_.lastSnapshotMs = 0;
  stats_.lastStallMs = stallMs;
  stats_.totalStallMs += stallMs;
  stats_.maxStallMs = std::max(stats_.maxStallMs, stallMs);
}

}  // namespace strata::detail
