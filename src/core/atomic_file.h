// Atomic file publication, the one way Strata writes a file that others read (checkpoints,
// debugger files, timelines, rule output, the report, stop files): a reader, or a job
// restarted after a crash, sees either the old state or the complete new file, never a
// torn one.
//
// Protocol (POSIX):
//   1. write to a temporary name in the same directory ("<path>.tmp-<pid>" by default),
//   2. kFileSynced, kDurable: fsync the temporary file (its bytes are on disk),
//   3. rename it over <path> (atomic within a file system),
//   4. kDurable: fsync the directory (the rename itself is on disk).
// A crash before 3 leaves only a temporary file, which readers ignore (isTemporaryName) and
// the checkpoint pruner removes; a crash after 3 leaves the whole new file.
//
// Durability is explicit at every call: kDurable for what must survive a power loss
// (checkpoints); kFileSynced where a name that survives must point at whole data but losing
// the newest file is acceptable (the debugger's per-step files: a directory fsync per step
// would delay every reader that follows the run); kAtomicOnly for what is rewritten often and
// can be recomputed (timelines, rule status, the report, the stop file).
//
// Threading: an AtomicFileWriter belongs to one thread; distinct paths may be written from
// different threads. Failures throw strata::Error naming the path and the errno text, except
// tryWriteFileAtomically, which reports them.
//
// Permissions: every file a job writes for others to read is created with kOutputFileMode
// (0640: owner read-write, group read, others nothing; the umask may remove more), here and
// through openOutputFile/createOutputFile for the files appended to in place (event files,
// timelines, system metrics, rule logs). Checkpoints, trial files and reports hold training
// data: they are not for every user of the machine (docs/security.md, "Files a job writes").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

enum class Durability {
  kAtomicOnly,   // rename only: never torn, but a power loss may lose or empty the new file
  kFileSynced,   // fsync the file before the rename: after a power loss, the old or the whole new file
  kDurable,      // and fsync the directory after it: the new file survives a power loss
};

constexpr mode_t kOutputFileMode = 0640;

// fopen(path, mode) that creates a missing file with kOutputFileMode; `mode` is "w", "wb",
// "a" or "ab". nullptr (and errno) on failure. An existing file keeps its mode.
std::FILE* openOutputFile(const std::string& path, const char* mode);
// Creates `path` with kOutputFileMode when it does not exist, so that a std::ofstream opened
// on it next does not create it with the umask's mode. Does nothing on failure (the open that
// follows reports it).
void createOutputFile(const std::string& path) noexcept;

// The temporary name used for `path`, and whether a file name is one.
std::string temporaryPathFor(const std::string& path);
bool isTemporaryName(const std::string& fileName);

// Publishes a complete file written under another name in the same file system as
// `target`: steps 2-4 above. Creates target's parent directories.
void publishFile(const std::string& temporary, const std::string& target, Durability durability);

class AtomicFileWriter {
 public:
  // Creates (truncates) the temporary file, and the parent directories.
  explicit AtomicFileWriter(std::string path, Durability durability = Durability::kDurable);
  // Without commit(), the temporary file is removed: nothing appears at `path`.
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Appends bytes. Blocks on disk I/O.
  void write(const void* data, size_t numBytes);
  // Publishes the file (steps 2-4).
  void commit();

  uint64_t bytesWritten() const { return bytes_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string tempPath_;
  Durability durability_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  bool committed_ = false;
};

// The whole protocol for a file held in memory.
void writeFileAtomically(const std::string& path, std::string_view content, Durability durability);
// The same for callers that must not throw (a failing rule-output write never fails the
// job): false, with the reason in *error when given.
bool tryWriteFileAtomically(const std::string& path, std::string_view content, Durability durability,
                            std::string* error = nullptr) noexcept;

// fsync of a directory (makes renames and unlinks in it durable).
void fsyncDirectory(const std::string& dir);
// mkdir -p.
void makeDirectories(const std::string& dir);
// Reads a whole file. Throws strata::Error naming the path.
std::vector<char> readWholeFile(const std::string& path);

}  // namespace strata
