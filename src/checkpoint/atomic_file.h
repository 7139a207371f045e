// Durable, atomic file writes: a reader (or a job restarted after a crash) sees either the
// old state or the complete new file, never a torn one.
//
// Protocol (what makes it atomic and durable on POSIX file systems):
//   1. write to "<path>.tmp-<pid>" in the same directory,
//   2. fsync the temporary file (its bytes are on disk),
//   3. rename it over <path> (atomic within a file system),
//   4. fsync the directory (the rename itself is on disk).
// A crash before 3 leaves only a temporary file, which readers ignore and the checkpoint
// pruner removes; a crash after 3 leaves the whole new file.
//
// Threading: an AtomicFileWriter belongs to one thread; distinct paths may be written
// from different threads. Every failure throws strata::Error naming the path and errno.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/sha256.h"

namespace strata::checkpoint {

// The temporary name used for `path` (the suffix readers and the pruner recognise).
std::string temporaryPathFor(const std::string& path);
bool isTemporaryName(const std::string& fileName);

class AtomicFileWriter {
 public:
  // Creates (truncates) the temporary file. The parent directory must exist.
  explicit AtomicFileWriter(std::string path);
  // Without commit(), the temporary file is removed: nothing appears at `path`.
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Appends bytes (and hashes them on the way). Blocks on disk I/O.
  void write(const void* data, size_t size);
  // fsync, rename, fsync the directory. Returns the SHA-256 of everything written.
  std::string commit();

  uint64_t bytesWritten() const { return bytes_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string tempPath_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  Sha256 sha_;
  bool committed_ = false;
};

// The whole protocol for a small file (manifests). Returns its SHA-256.
std::string writeFileAtomically(const std::string& path, std::string_view content);

// fsync of a directory (makes renames and unlinks in it durable).
void fsyncDirectory(const std::string& dir);
// mkdir -p.
void makeDirectories(const std::string& dir);
// Reads a whole file. Throws strata::Error naming the path.
std::vector<char> readWholeFile(const std::string& path);

}  // namespace strata::checkpoint
