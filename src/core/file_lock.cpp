#include "core/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/atomic_file.h"

namespace strata {
namespace {

std::string failure(const char* step, const std::string& path, int err) {
  return std::string(step) + " " + path + ": " + std::strerror(err);
}

// The holder's line as it is now (at most one line of a few hundred bytes).
std::string readHolderLine(int fd) {
  char buf[512];
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "";
  std::string text(buf, static_cast<size_t>(n));
  const size_t end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

bool writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::pwrite(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

FileLock::Attempt FileLock::tryAcquire(const std::string& path, const std::string& holderLine) {
  Attempt attempt;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) {
    attempt.detail = "cannot create " + parent.string() + ": " + ec.message();
    return attempt;
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, kOutputFileMode);
  if (fd < 0) {
    attempt.detail = failure("cannot open", path, errno);
    return attempt;
  }
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      attempt.outcome = Outcome::kHeld;
      attempt.detail = readHolderLine(fd);
    } else {
      attempt.detail = failure("cannot lock", path, err);  // e.g. ENOLCK: no locks on this file system
    }
    ::close(fd);
    return attempt;
  }
  // Ours now: the line of an earlier holder goes. The line only explains a refusal to the next
  // comer, so failing to write it (a full disk) does not give the lock up.
  if (::ftruncate(fd, 0) != 0 || !writeAll(fd, holderLine + "\n")) attempt.detail = failure("cannot write", path, errno);
  attempt.outcome = Outcome::kAcquired;
  attempt.lock.reset(new FileLock(fd, path));
  return attempt;
}

FileLock::~FileLock() { ::close(fd_); }

}  // namespace strata
