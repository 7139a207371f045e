// An exclusive lock on a file, held while the FileLock lives. It is flock(2): the kernel drops
// it when the holder's process ends, however it ends, so a job killed with SIGKILL leaves no
// stale lock behind and the next job (or the same job restarted) takes it at once.
//
// The file holds one line describing its holder, written when the lock is taken, for the
// error of whoever finds it taken. The file is never deleted: removing a lock file races with
// a process that has already opened it, and two processes could then hold locks on two
// different files of the same name.
//
// Threading: a FileLock belongs to one thread. Two FileLocks of one process on the same file
// exclude each other too (flock locks belong to the open file, not the process).
#pragma once

#include <memory>
#include <string>

namespace strata {

class FileLock {
 public:
  enum class Outcome {
    kAcquired,     // `lock` holds it
    kHeld,         // another holder has it
    kUnavailable,  // the file could not be created, opened or locked here (`detail` says why)
  };
  struct Attempt {
    Outcome outcome = Outcome::kUnavailable;
    std::unique_ptr<FileLock> lock;  // set for kAcquired only
    // kHeld: the holder's line ("" when it has not written it yet); kUnavailable: the step
    // that failed, the path and the errno text; kAcquired: "" or why the line could not be
    // written (the lock is held all the same).
    std::string detail;
  };

  // Never blocks. Creates the parent directories and the file (mode 0644) as needed, and on
  // success replaces the file's text with `holderLine`.
  static Attempt tryAcquire(const std::string& path, const std::string& holderLine);

  ~FileLock();  // releases the lock (closes the descriptor); the file stays
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  FileLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

}  // namespace strata
