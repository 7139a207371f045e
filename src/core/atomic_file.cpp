#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/errors.h"

namespace strata {
namespace {

constexpr const char* kTempMarker = ".tmp-";

std::string parentOf(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

void fsyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  STRATA_CHECK(fd >= 0, "cannot open ", path, " to fsync it: ", std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  STRATA_CHECK(rc == 0, "fsync of ", path, " failed: ", std::strerror(err));
}

}  // namespace

std::FILE* openOutputFile(const std::string& path, const char* mode) {
  const std::string m = mode;
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC;
  if (m == "w" || m == "wb") flags |= O_TRUNC;
  else if (m == "a" || m == "ab") flags |= O_APPEND;
  else STRATA_THROW(Error, "openOutputFile(", path, "): mode \"", m, "\" is none of w, wb, a, ab");
  const int fd = ::open(path.c_str(), flags, kOutputFileMode);
  if (fd < 0) return nullptr;
  std::FILE* f = ::fdopen(fd, mode);
  if (f == nullptr) {
    const int err = errno;
    ::close(fd);
    errno = err;
  }
  return f;
}

void createOutputFile(const std::string& path) noexcept {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, kOutputFileMode);
  if (fd >= 0) ::close(fd);
}

std::string temporaryPathFor(const std::string& path) { return path + kTempMarker + std::to_string(getpid()); }

bool isTemporaryName(const std::string& fileName) { return fileName.find(kTempMarker) != std::string::npos; }

void publishFile(const std::string& temporary, const std::string& target, Durability durability) {
  if (durability != Durability::kAtomicOnly) fsyncPath(temporary);
  makeDirectories(parentOf(target));
  STRATA_CHECK(::rename(temporary.c_str(), target.c_str()) == 0, "renaming ", temporary, " to ", target,
               " failed: ", std::strerror(errno));
  if (durability == Durability::kDurable) fsyncDirectory(parentOf(target));
}

AtomicFileWriter::AtomicFileWriter(std::string path, Durability durability)
    : path_(std::move(path)), tempPath_(temporaryPathFor(path_)), durability_(durability) {
  makeDirectories(parentOf(path_));
  fd_ = ::open(tempPath_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kOutputFileMode);
  STRATA_CHECK(fd_ >= 0, "cannot create ", tempPath_, ": ", std::strerror(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tempPath_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t numBytes) {
  STRATA_CHECK(!committed_ && fd_ >= 0, "write to ", path_, " after commit");
  const char* p = static_cast<const char*>(data);
  size_t left = numBytes;
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    STRATA_CHECK(n > 0, "writing ", tempPath_, " failed after ", bytes_, " bytes: ", std::strerror(errno));
    p += n;
    left -= static_cast<size_t>(n);
    bytes_ += static_cast<uint64_t>(n);
  }
}

void AtomicFileWriter::commit() {
  STRATA_CHECK(!committed_ && fd_ >= 0, "commit of ", path_, " twice");
  if (durability_ != Durability::kAtomicOnly)
    STRATA_CHECK(::fsync(fd_) == 0, "fsync of ", tempPath_, " failed: ", std::strerror(errno));
  const int rc = ::close(fd_);
  fd_ = -1;
  STRATA_CHECK(rc == 0, "closing ", tempPath_, " failed: ", std::strerror(errno));
  STRATA_CHECK(::rename(tempPath_.c_str(), path_.c_str()) == 0, "renaming ", tempPath_, " to ", path_,
               " failed: ", std::strerror(errno));
  committed_ = true;
  if (durability_ == Durability::kDurable) fsyncDirectory(parentOf(path_));
}

void writeFileAtomically(const std::string& path, std::string_view content, Durability durability) {
  AtomicFileWriter writer(path, durability);
  writer.write(content.data(), content.size());
  writer.commit();
}

bool tryWriteFileAtomically(const std::string& path, std::string_view content, Durability durability,
                            std::string* error) noexcept {
  try {
    writeFileAtomically(path, content, durability);
    return true;
  } catch (const std::exception& e) {
    if (error != nullptr) *error = e.what();
  } catch (...) {
    if (error != nullptr) *error = "unknown error writing " + path;
  }
  return false;
}

void fsyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  STRATA_CHECK(fd >= 0, "cannot open directory ", dir, ": ", std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems (tmpfs on old kernels, certain FUSE mounts) refuse fsync on a
  // directory; the rename is still atomic there, only its durability is theirs to give.
  if (rc != 0 && err != EINVAL && err != ENOTSUP)
    STRATA_THROW(Error, "fsync of directory ", dir, " failed: ", std::strerror(err));
}

void makeDirectories(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  STRATA_CHECK(!ec, "cannot create directory ", dir, ": ", ec.message());
}

std::vector<char> readWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  STRATA_CHECK(fd >= 0, "cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  std::vector<char> out;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) out.resize(static_cast<size_t>(st.st_size));
  size_t used = 0;
  char probe[1 << 16];  // past the expected size: detects EOF, or a file that grew
  for (;;) {
    const bool full = used == out.size();
    const ssize_t n = full ? ::read(fd, probe, sizeof(probe)) : ::read(fd, out.data() + used, out.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      STRATA_CHECK(n == 0, "reading ", path, " failed: ", std::strerror(err));
      break;
    }
    if (full) out.insert(out.end(), probe, probe + n);
    used += static_cast<size_t>(n);
  }
  out.resize(used);
  return out;
}

}  // namespace strata
