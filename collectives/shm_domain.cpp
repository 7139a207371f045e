#include "collectives/shm_domain.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "core/affinity.h"
#include "core/errors.h"
#include "core/logging.h"
#include "transport/shm/doorbell.h"

namespace strata::collectives {

using transport::shm::cpuRelax;
using transport::shm::Doorbell;
using transport::shm::doorbellValue;
using transport::shm::ringDoorbell;
using transport::shm::sleepOnDoorbell;

namespace {

constexpr uint64_t kMagic = 0x5354524154415348ull;  // "STRATASH"
constexpr size_t kCacheLine = 64;
constexpr size_t kHeaderBytes = 4096;
// Spins before yielding when every rank has a core of its own: a cross-core flag
// handoff takes 0.05-0.3 us here, so a few microseconds of spinning catches it.
constexpr int kSpinsDedicatedCores = 20000;
// When ranks outnumber cores the peer we wait for may need our core: yield almost at once.
constexpr int kSpinsOversubscribed = 16;
// How often (in yields) to look at the clock.
constexpr int kCheckEvery = 64;
// Bound on one doorbell sleep, so the abort word, the timeout and the peers' liveness are
// still checked this often, and a waiter whose caller began to wait goes back to spinning.
constexpr std::chrono::microseconds kSleepSlice{1000};
// How often the spin phase looks whether the caller still waits.
constexpr int kSpinsPerAwaitedCheck = 64;
// Spins (about 20 ns each here) even a wait nobody waits for makes before it sleeps: a peer
// that arrives within them costs the compute thread less than a futex wakeup would delay it.
constexpr int kSpinsBeforeSleep = 1024;
// Peer processes are probed with kill(pid, 0) at most this often.
constexpr std::chrono::milliseconds kLivenessPeriod{20};

size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

}  // namespace

struct ShmDomain::Header {
  std::atomic<uint64_t> magic;
  uint64_t localSize;
  uint64_t slotBytes;
  // 0: healthy. Otherwise (blamed group rank + 2) in the low 32 bits (1 = nobody in
  // particular) and the reporting local rank in the high 32 bits.
  std::atomic<uint64_t> abortWord;
};

struct alignas(kCacheLine) ShmDomain::RankCtl {
  alignas(kCacheLine) std::atomic<uint64_t> flag;   // epoch published by this rank
  Doorbell bell;                                    // rung after each new flag and on abort
  alignas(kCacheLine) CollSignature sig[2];         // by seq parity (a peer may be one ahead)
  pid_t pid;
  cpu_set_t cpus;  // this rank's affinity, so every rank can count the cores the domain has
  int32_t abortKind;
  char abortReason[200];
};

ShmDomain::ShmDomain(int localRank, std::vector<int> globalRanks, const ShmDomainOptions& opts)
    : localRank_(localRank),
      globalRanks_(std::move(globalRanks)),
      slotBytes_(roundUp(opts.slotBytes, kCacheLine)),
      timeout_(opts.timeout),
      spinsBeforeYield_(opts.spinsBeforeYield) {}

int spinsForCores(int localSize, int coresOfDomain) {
  return localSize > coresOfDomain ? kSpinsOversubscribed : kSpinsDedicatedCores;
}

std::unique_ptr<ShmDomain> ShmDomain::create(bootstrap::Store& store, int localRank,
                                             std::vector<int> globalRanks,
                                             const ShmDomainOptions& opts) {
  std::unique_ptr<ShmDomain> d(new ShmDomain(localRank, std::move(globalRanks), opts));
  if (localRank == 0) {
    std::random_device rd;
    d->name_ = c10::str("/strata.", getpid(), ".", std::hex, rd(), rd());
    d->mapSegment(d->name_, /*create=*/true);
    bootstrap::setString(store, "shm/name", d->name_);
  } else {
    d->name_ = bootstrap::getString(store, "shm/name", d->timeout_);
    d->mapSegment(d->name_, /*create=*/false);
  }
  RankCtl& me = d->ctl(localRank);
  me.pid = getpid();
  me.cpus = ownCpus();
  // Pre-fault our own staging buffers now, so no collective ever takes a page fault.
  std::memset(d->slot(localRank, 0), 0, 2 * d->slotBytes_);
  bootstrap::storeBarrier(store, "shm/attached", d->localSize(), d->timeout_);
  if (localRank == 0) shm_unlink(d->name_.c_str());  // mapped by all: nothing to leak
  // Cores of the whole domain: the union of every local rank's affinity. A launcher that
  // binds each rank to one core (mpirun's default for small jobs) does not oversubscribe.
  cpu_set_t all;
  CPU_ZERO(&all);
  for (int i = 0; i < d->localSize(); ++i) CPU_OR(&all, &all, &d->ctl(i).cpus);
  d->coresOfDomain_ = CPU_COUNT(&all);
  if (d->spinsBeforeYield_ < 0) d->spinsBeforeYield_ = spinsForCores(d->localSize(), d->coresOfDomain_);
  STRATA_LOG(kInfo, kShm, "shm domain ", d->name_, " local_size=", d->localSize(),
             " slot_bytes=", d->slotBytes_, " spins_before_yield=", d->spinsBeforeYield_,
             " cores=", d->coresOfDomain_);
  return d;
}

void ShmDomain::mapSegment(const std::string& name, bool create) {
  const size_t ctlBytes = roundUp(sizeof(RankCtl) * localSize(), 4096);
  mappedBytes_ = kHeaderBytes + ctlBytes + 2 * slotBytes_ * localSize();
  const int fd = create ? shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600)
                        : shm_open(name.c_str(), O_RDWR, 0600);
  STRATA_CHECK_NET(fd >= 0, "shm_open(", name, ") failed: ", std::strerror(errno));
  if (create && ftruncate(fd, static_cast<off_t>(mappedBytes_)) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    STRATA_THROW(NetworkError, "ftruncate of shared memory ", name, " to ", mappedBytes_,
                 " bytes failed: ", std::strerror(err), " (is /dev/shm large enough?)");
  }
  base_ = mmap(nullptr, mappedBytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  STRATA_CHECK_NET(base_ != MAP_FAILED, "mmap of ", name, " (", mappedBytes_,
                   " bytes) failed: ", std::strerror(errno));
  header_ = static_cast<Header*>(base_);
  slots_ = static_cast<uint8_t*>(base_) + kHeaderBytes + ctlBytes;
  if (create) {
    header_->localSize = static_cast<uint64_t>(localSize());
    header_->slotBytes = slotBytes_;
    header_->abortWord.store(0);
    for (int i = 0; i < localSize(); ++i) ctl(i).flag.store(0);
    header_->magic.store(kMagic, std::memory_order_release);
  } else {
    STRATA_CHECK_NET(header_->magic.load(std::memory_order_acquire) == kMagic &&
                         header_->localSize == static_cast<uint64_t>(localSize()) &&
                         header_->slotBytes == slotBytes_,
                     "shared memory segment ", name, " has an unexpected layout (local_size ",
                     header_->localSize, " vs ", localSize(), ", slot_bytes ", header_->slotBytes,
                     " vs ", slotBytes_, ")");
  }
}

ShmDomain::~ShmDomain() {
  if (base_ && base_ != MAP_FAILED) munmap(base_, mappedBytes_);
}

ShmDomain::RankCtl& ShmDomain::ctl(int local) const {
  auto* first = reinterpret_cast<RankCtl*>(static_cast<uint8_t*>(base_) + kHeaderBytes);
  return first[local];
}

uint8_t* ShmDomain::slot(int local, int buffer) const {
  return slots_ + (static_cast<size_t>(local) * 2 + static_cast<size_t>(buffer)) * slotBytes_;
}

void ShmDomain::publishSignature(const CollSignature& sig) {
  ctl(localRank_).sig[sig.seq & 1] = sig;
}

void ShmDomain::checkSignatures(const CollSignature& sig) {
  for (int p = 0; p < localSize(); ++p) {
    if (p == localRank_) continue;
    const CollSignature theirs = ctl(p).sig[sig.seq & 1];
    if (theirs != sig) {
      const std::string reason = c10::str("collective mismatch: rank ", globalRanks_[localRank_],
                                          " called ", describe(sig), " but rank ",
                                          globalRanks_[p], " called ", describe(theirs));
      abort(globalRanks_[p], reason, AbortKind::kMismatch);
      STRATA_THROW(MismatchError, reason);
    }
  }
}

bool ShmDomain::peerProcessAlive(int peer) const {
  const pid_t pid = ctl(peer).pid;
  if (pid <= 0 || pid == getpid()) return true;
  return kill(pid, 0) == 0 || errno != ESRCH;
}

void ShmDomain::abort(int blamedRank, const std::string& reason, AbortKind kind) {
  // The first abort's reason stands; later ones (the same failure seen again) add nothing.
  if (header_->abortWord.load(std::memory_order_acquire) != 0) return;
  RankCtl& me = ctl(localRank_);
  me.abortKind = static_cast<int32_t>(kind);
  std::strncpy(me.abortReason, reason.c_str(), sizeof(me.abortReason) - 1);
  me.abortReason[sizeof(me.abortReason) - 1] = '\0';
  uint64_t expected = 0;
  const uint64_t word = static_cast<uint64_t>(blamedRank + 2) |
                        (static_cast<uint64_t>(localRank_) << 32);
  header_->abortWord.compare_exchange_strong(expected, word, std::memory_order_acq_rel);
  for (int p = 0; p < localSize(); ++p) ringDoorbell(ctl(p).bell);  // sleepers look at once
}

void ShmDomain::throwAborted() {
  const uint64_t word = header_->abortWord.load(std::memory_order_acquire);
  const int reporter = static_cast<int>(word >> 32);
  const int blamed = static_cast<int>(word & 0xffffffffu) - 2;
  const std::string reason(ctl(reporter).abortReason);
  const std::string text = c10::str("group aborted by rank ", globalRanks_[reporter],
                                    blamed >= 0 ? c10::str(" (blaming rank ", blamed, ")") : std::string(), ": ",
                                    reason);
  switch (static_cast<AbortKind>(ctl(reporter).abortKind)) {
    case AbortKind::kTimeout: STRATA_THROW(TimeoutError, text);
    case AbortKind::kMismatch: STRATA_THROW(MismatchError, text);
    case AbortKind::kNetwork: break;
  }
  STRATA_THROW(NetworkError, text);
}

void ShmDomain::syncAll(const char* what) {
  // A group that failed anywhere fails at once on every later call.
  if (header_->abortWord.load(std::memory_order_relaxed) != 0) throwAborted();
  const uint64_t epoch = ++epoch_;
  ctl(localRank_).flag.store(epoch, std::memory_order_release);
  ringDoorbell(ctl(localRank_).bell);
  for (int p = 0; p < localSize(); ++p) {
    if (p != localRank_) waitForPeer(p, epoch, what);
  }
}

// A rank's communication thread shares its core with the compute thread (one rank per core):
// spinning and yielding there while the compute thread runs took up to two thirds of the
// communication thread's 15-17 ms of CPU per ~100 ms mlp25m step (perf, bench/RESULTS.md
// session 13). So only a wait that someone waits for spins long; the others sleep on the
// doorbell.
void ShmDomain::waitForPeer(int peer, uint64_t epoch, const char* what) {
  RankCtl& theirs = ctl(peer);
  for (int i = 0; i < spinsBeforeYield_; ++i) {
    if (theirs.flag.load(std::memory_order_acquire) >= epoch) return;
    if (i >= kSpinsBeforeSleep && i % kSpinsPerAwaitedCheck == 0 && !awaited()) break;
    cpuRelax();
  }
  const auto start = std::chrono::steady_clock::now();
  auto lastLiveness = start;
  for (uint64_t iter = 0;; ++iter) {
    const uint32_t seen = doorbellValue(theirs.bell);  // before the check: no lost wakeup
    if (theirs.flag.load(std::memory_order_acquire) >= epoch) return;
    if (!awaited()) {
      sleepOnDoorbell(theirs.bell, seen, kSleepSlice);
    } else {
      sched_yield();
      if (iter % kCheckEvery != 0) continue;
    }
    if (header_->abortWord.load(std::memory_order_acquire) != 0) throwAborted();
    const auto now = std::chrono::steady_clock::now();
    if (now - lastLiveness >= kLivenessPeriod) {
      lastLiveness = now;
      if (!peerProcessAlive(peer)) {
        const std::string reason = c10::str("rank ", globalRanks_[peer], " (pid ", theirs.pid,
                                            ") died during ", what);
        abort(globalRanks_[peer], reason);
        STRATA_THROW(NetworkError, reason);
      }
    }
    if (now - start >= timeout_) {
      const std::string reason =
          c10::str(what, ": rank ", globalRanks_[peer], " did not arrive within ", timeout_.count(),
                   " ms (shm epoch ", epoch, ", peer at ", theirs.flag.load(), ")");
      abort(globalRanks_[peer], reason, AbortKind::kTimeout);
      STRATA_THROW(TimeoutError, reason);
    }
  }
}

}  // namespace strata::collectives
