// A doorbell: a 32-bit word in shared memory that threads of any process sleep on (a
// cross-process futex) until another rings it.
//
// Waiting without burning a core matters when the waiter shares its core with work that
// could run instead (a rank's communication thread next to its compute thread, or more
// ranks than cores): a spinning or yielding waiter takes that core's time, a sleeper none.
//
// Protocol (no lost wakeups): the waiter reads `seen = doorbellValue(bell)`, then checks its
// condition, then calls sleepOnDoorbell(bell, seen, limit). The ringer makes the condition
// true, then calls ringDoorbell(bell). Either the waiter's check sees the condition, or the
// word has changed since `seen` and the futex returns at once, or the ringer sees the
// sleeper and wakes it (every step sequentially consistent).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace strata::transport::shm {

struct Doorbell {
  alignas(64) std::atomic<uint32_t> word{0};
  alignas(64) std::atomic<uint32_t> sleepers{0};
};

uint32_t doorbellValue(const Doorbell& bell);

// Wakes every sleeper (a system call only when one sleeps).
void ringDoorbell(Doorbell& bell);

// Sleeps until the bell rings, `limit` passes or a signal arrives, whichever is first;
// returns at once if the word is no longer `seen`.
void sleepOnDoorbell(Doorbell& bell, uint32_t seen, std::chrono::microseconds limit);

// What a waiter does between two looks while it spins, before it yields or sleeps on a
// doorbell: the CPU's spin-wait hint (x86 PAUSE); elsewhere only a compiler barrier.
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace strata::transport::shm
