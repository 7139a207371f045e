// Small file-system helpers for the debugger's writer and reader. Each call is a plain
// effect; they are thread-safe as far as the file system is (distinct paths per thread).
// Failures of the writing helpers throw strata::Error naming the path and errno text.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.h"

// Atomic publication (writeFileAtomically, publishFile) and makeDirectories: core/atomic_file.h.
namespace strata::debugger {

// Creates an empty file if it does not exist yet (the end-of-job marker).
void touchFile(const std::string& path);

bool fileExists(const std::string& path);
// Reads a whole file; false with *error (path + errno text) on failure.
bool readWholeFile(const std::string& path, std::string* out, std::string* error);
// Reads `length` bytes at `offset`; false if the file is shorter or unreadable.
bool readFileRange(const std::string& path, uint64_t offset, uint64_t length, std::string* out,
                   std::string* error);
// Regular files under `dir` (recursively), as paths relative to `dir`, sorted. Missing
// directory: empty.
std::vector<std::string> listFilesRecursive(const std::string& dir);

// An append-only file opened for writing, closed (without renaming) on destruction.
class AppendFile {
 public:
  explicit AppendFile(const std::string& path);  // truncates; throws on failure
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  void append(const void* data, size_t size);  // throws on a short write
  uint64_t size() const { return size_; }
  void flush();          // stdio buffer to the kernel
  void sync();           // flush + fdatasync
  void close();          // flush + fclose; idempotent
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace strata::debugger
