// One job per output_dir. Two jobs writing one directory mix their debugger steps, rename each
// other's timelines away and overwrite or resume each other's checkpoints, and nothing says
// so (seen: two 1-rank jobs started in one working directory lost timeline files with
// "renaming ... failed: No such file or directory"). So rank 0 of every job holds
// <output_dir>/.strata-job.lock (core/file_lock.h) from strata::init to strata::finalize, and
// a job that finds it taken fails at init, on every rank, with a ConfigError (exit 78) naming
// output_dir, its value, the rank and the job that holds it. The kernel drops the lock when
// its process ends, however it ends: a killed job restarted on the same directory (resume)
// takes it again at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/file_lock.h"

namespace strata::bootstrap {
class Store;
}

namespace strata::runtime {

constexpr char kOutputDirLockName[] = ".strata-job.lock";

std::string outputDirLockPath(const std::string& outputDir);

// The line the holder writes into the lock file, e.g.
// "pid 4242 on host node-1, rank 0 of 2, since 2026-11-28T09:05:01Z".
std::string outputDirHolderLine(int64_t pid, const std::string& host, int worldSize,
                                std::chrono::system_clock::time_point since);

// Pure: what a job does with rank 0's attempt. "" to go on; otherwise the error every rank
// raises (kHeld). kUnavailable goes on (a warning names why): the job's own writers report a
// directory they cannot write, and a file system without locks must not stop training.
std::string outputDirLockRefusal(const std::string& outputDir, FileLock::Outcome outcome, const std::string& detail);

// Every rank of the job calls it at init, before anything is written: rank 0 tries the lock
// and publishes its verdict in the job's rendezvous store (not a collective: the user's
// collectives keep their sequence numbers, which flight recorder dumps show); then every rank
// throws ConfigError with the refusal, if any. A rank 0 that never publishes is a
// TimeoutError after `timeout` naming the key. Returns the lock on rank 0 when it was taken
// (hold it until the job's files are closed), else null.
std::unique_ptr<FileLock> lockOutputDir(bootstrap::Store& store, int rank, int worldSize,
                                        std::chrono::milliseconds timeout, const std::string& outputDir,
                                        const std::string& host);

}  // namespace strata::runtime
