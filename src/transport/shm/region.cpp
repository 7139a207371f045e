#include "transport/shm/region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "core/errors.h"
#include "core/logging.h"

namespace strata::transport::shm {
namespace {

constexpr size_t kPageBytes = 4096;
// Far above any real buffer, low enough that localSize * part never overflows.
constexpr size_t kMaxBytes = size_t{1} << 40;

size_t roundUpToPage(size_t v) { return (std::max<size_t>(v, 1) + kPageBytes - 1) / kPageBytes * kPageBytes; }

// Maps the peers' (already faulted) pages into our page tables now rather than on the first
// accesses.
void populateForReading(uint8_t* data, size_t numBytes) {
#ifdef MADV_POPULATE_READ
  if (madvise(data, numBytes, MADV_POPULATE_READ) == 0) return;
#endif
  // Older kernels: touch one byte per page.
  volatile uint8_t sink = 0;
  for (size_t at = 0; at < numBytes; at += kPageBytes) sink = static_cast<uint8_t>(sink + data[at]);
}

// Removes a segment's name when the creator leaves the scope, whatever happens: the
// mappings keep the memory alive, and a crash cannot leave the name behind for long.
class NameGuard {
 public:
  explicit NameGuard(const std::string& name) : name_(name) {}
  ~NameGuard() {
    if (active_) shm_unlink(name_.c_str());
  }
  NameGuard(const NameGuard&) = delete;
  NameGuard& operator=(const NameGuard&) = delete;
  void arm() { active_ = true; }

 private:
  const std::string& name_;
  bool active_ = false;
};

}  // namespace

Region::Region(uint64_t id, size_t numBytes, int localSize, int localRank)
    : id_(id), numBytes_(numBytes), partBytes_(roundUpToPage(numBytes)), localSize_(localSize),
      localRank_(localRank), mappedBytes_(partBytes_ * static_cast<size_t>(localSize)) {
  STRATA_CHECK(numBytes <= kMaxBytes, "allocate_shared: ", numBytes, " bytes is more than the limit of ", kMaxBytes);
}

Region::~Region() {
  if (base_) munmap(base_, mappedBytes_);
}

bool Region::contains(const void* data, size_t numBytes) const {
  const auto* p = static_cast<const uint8_t*>(data);
  const uint8_t* begin = mine();
  return p >= begin && p <= begin + numBytes_ && numBytes <= static_cast<size_t>(begin + numBytes_ - p);
}

void Region::map(int fd) {
  void* base = mmap(nullptr, mappedBytes_, PROT_READ | PROT_WRITE, fd >= 0 ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS,
                    fd, 0);
  const int err = errno;
  if (fd >= 0) close(fd);
  STRATA_CHECK_NET(base != MAP_FAILED, "allocate_shared: mmap of ", mappedBytes_, " bytes failed: ",
                   std::strerror(err));
  base_ = static_cast<uint8_t*>(base);
}

void Region::mapPrivate() {
  map(-1);
  std::memset(base_, 0, partBytes_);
}

void Region::mapShared(LocalPeers& peers) {
  const std::string name = peers.name() + ".b" + std::to_string(id_);
  const bool creator = localRank_ == 0;
  NameGuard guard(name);
  if (creator) {
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    STRATA_CHECK_NET(fd >= 0, "allocate_shared: shm_open(", name, ") failed: ", std::strerror(errno));
    guard.arm();
    // Reserve the pages now (posix_fallocate): on a full /dev/shm the first touch of a page
    // would otherwise be a SIGBUS. The peers, waiting in syncAll, fail at once with our reason.
    int err = ftruncate(fd, static_cast<off_t>(mappedBytes_)) != 0 ? errno : 0;
    if (err == 0) err = posix_fallocate(fd, 0, static_cast<off_t>(mappedBytes_));
    if (err != 0) {
      close(fd);
      const std::string why = c10::str("allocate_shared: reserving ", mappedBytes_, " bytes of ", name,
                                       " failed: ", std::strerror(err), " (is /dev/shm large enough?)");
      peers.fail(why);
      STRATA_THROW(NetworkError, why);
    }
    map(fd);
  }
  peers.syncAll("allocate_shared (segment created)");
  if (!creator) {
    const int fd = shm_open(name.c_str(), O_RDWR, 0600);
    STRATA_CHECK_NET(fd >= 0, "allocate_shared: shm_open(", name, ") failed: ", std::strerror(errno));
    map(fd);
  }
  std::memset(mine(), 0, partBytes_);  // first touch by the owner
  peers.syncAll("allocate_shared (segment mapped)");
  for (int p = 0; p < localSize_; ++p)
    if (p != localRank_) populateForReading(part(p), partBytes_);
  STRATA_LOG(kDebug, kShm, "shared buffer ", id_, ": ", numBytes_, " bytes x ", localSize_, " local ranks (", name,
             ")");
}

}  // namespace strata::transport::shm
