#include "transport/shm/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace strata::transport::shm {

// Cross-process futexes (no FUTEX_PRIVATE_FLAG): the word lives in a shared mapping.
uint32_t doorbellValue(const Doorbell& bell) { return bell.word.load(std::memory_order_seq_cst); }

void ringDoorbell(Doorbell& bell) {
  bell.word.fetch_add(1, std::memory_order_seq_cst);
  if (bell.sleepers.load(std::memory_order_seq_cst) > 0) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell.word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
}

void sleepOnDoorbell(Doorbell& bell, uint32_t seen, std::chrono::microseconds limit) {
  const timespec ts{static_cast<time_t>(limit.count() / 1000000), static_cast<long>(limit.count() % 1000000) * 1000};
  bell.sleepers.fetch_add(1, std::memory_order_seq_cst);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell.word), FUTEX_WAIT, seen, &ts, nullptr, 0);
  bell.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace strata::transport::shm
