#include "runtime/output_dir_lock.h"

#include <unistd.h>

#include <ctime>
#include <filesystem>

#include "bootstrap/store.h"
#include "core/errors.h"
#include "core/logging.h"

namespace strata::runtime {

std::string outputDirLockPath(const std::string& outputDir) {
  return (std::filesystem::path(outputDir) / kOutputDirLockName).string();
}

std::string outputDirHolderLine(int64_t pid, const std::string& host, int worldSize,
                                std::chrono::system_clock::time_point since) {
  const std::time_t t = std::chrono::system_clock::to_time_t(since);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return "pid " + std::to_string(pid) + " on host " + host + ", rank 0 of " + std::to_string(worldSize) + ", since " +
         stamp;
}

std::string outputDirLockRefusal(const std::string& outputDir, FileLock::Outcome outcome, const std::string& detail) {
  if (outcome != FileLock::Outcome::kHeld) return "";
  const std::string holder = detail.empty() ? "a job that is still starting" : "the job of " + detail;
  return "output_dir \"" + outputDir + "\" is in use by another running job (" + holder + ", holding " +
         outputDirLockPath(outputDir) +
         "): two jobs in one output_dir would mix their tensors, timelines and checkpoints. Give this job its "
         "own output_dir (config key output_dir), or start it once the other has ended";
}

std::unique_ptr<FileLock> lockOutputDir(bootstrap::Store& store, int rank, int worldSize,
                                        std::chrono::milliseconds timeout, const std::string& outputDir,
                                        const std::string& host) {
  constexpr char kVerdictKey[] = "init/output_dir_refusal";
  std::unique_ptr<FileLock> lock;
  std::string refusal;
  if (rank == 0) {
    FileLock::Attempt attempt = FileLock::tryAcquire(
        outputDirLockPath(outputDir), outputDirHolderLine(::getpid(), host, worldSize, std::chrono::system_clock::now()));
    refusal = outputDirLockRefusal(outputDir, attempt.outcome, attempt.detail);
    if (attempt.outcome == FileLock::Outcome::kUnavailable) {
      STRATA_LOG(kWarn, kInit, "output_dir \"", outputDir, "\" is not locked against a second job (", attempt.detail,
                 "); training goes on");
    } else if (!attempt.detail.empty() && attempt.lock) {
      STRATA_LOG(kWarn, kInit, "output_dir lock taken, but its holder line was not written: ", attempt.detail);
    }
    lock = std::move(attempt.lock);
  }
  // Every rank raises rank 0's refusal, so none goes on to wait for a rank 0 that has left.
  if (worldSize > 1) {
    if (rank == 0) {
      bootstrap::setString(store, kVerdictKey, refusal);
    } else {
      refusal = bootstrap::getString(store, kVerdictKey, timeout);
    }
  }
  if (!refusal.empty()) STRATA_THROW(ConfigError, refusal);
  return lock;
}

}  // namespace strata::runtime
