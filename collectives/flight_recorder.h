// The flight recorder: each rank's last N collective and point-to-point operations, kept
// in a bounded ring so that a hang, a mismatch or a dead peer can be explained after the
// fact (PyTorch's NCCL flight recorder is the model; docs/flight_recorder.md).
//
// Vocabulary:
//   record   one operation: group, sequence number, op, dtype, count and bytes, peer or
//            root, state (enqueued -> started -> completed | failed) and three times.
//   lane     a ring of its own: lane 0 is shared by every writer; a writer that records one
//            operation at a time (a communicator's collectives, issued in order) takes a
//            private lane (acquireLane), where claiming a slot needs no atomic
//            read-modify-write. Each lane keeps its newest `capacity` records.
//   id       a record's position in its lane's history (1, 2, ...); slot = id mod the
//            ring's size. A record whose slot was reused is gone.
//   ticks    the hot path's clock (Clock below); snapshot() converts them to Unix
//            nanoseconds.
//
// Cost: recording is on every collective's path (a 4 KiB shm allreduce takes 0.45-1.7 us
// on the bench host), so record/start/finish take no lock, allocate nothing, format
// nothing and are inline (defined at the end of this header): a slot claimed by a plain
// increment in a private lane (an atomic add in the shared one), plain stores into it, the
// next slot prefetched, and one clock read at each state change (by default the ticker's
// cell: one relaxed load, collectives/flight_ticker.h). A synchronous collective reads
// the clock twice: once for enqueue and start (the same moment: equal times in the
// record), once for its end.
//
// Threading: record/start/finish are thread-safe and lock-free: any number of writers in
// the shared lane, one at a time in a private lane (its owner's calls must not overlap). A
// record is changed by one thread at a time (the one running its operation). Readers
// (snapshot) use a per-slot sequence lock and skip a slot being written; they never block
// writers. registerGroup, reportFailure and snapshot take a mutex and may allocate.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/flight_ticker.h"
#include "strata/types.h"

namespace strata::collectives::flight {

enum class Op : uint8_t {
  kAllReduce,
  kBroadcast,
  kAllGather,
  kReduceScatter,
  kBarrier,
  kSend,
  kRecv,
  kAllocateShared,
  kReduceScatterShared,
};
enum class State : uint8_t { kEnqueued, kStarted, kCompleted, kFailed };
// kTicker: the process's ticker thread's last CLOCK_MONOTONIC reading (flight_ticker.h):
// one load a read, the ticker's period (50 ms) as resolution, plus however long the thread
// was kept off a core.
// kCoarse: CLOCK_MONOTONIC_COARSE, the kernel tick (1-4 ms resolution), ~2.5 ns a read.
// kPrecise: the TSC where it is invariant (x86-64 with constant_tsc and nonstop_tsc), else
// steady_clock: nanoseconds, but 3-5 times the cost of a coarse read (bench/RESULTS.md).
enum class Clock : uint8_t { kTicker, kCoarse, kPrecise };
const char* opName(Op op);           // "allreduce", ..., "send", "recv", "allocate_shared", "reduce_scatter_shared"
const char* stateName(State state);  // "enqueued", "started", "completed", "failed"

// What the caller knows about an operation when it records it.
struct OpInfo {
  uint32_t group = 0;    // Recorder::registerGroup's index
  uint64_t seq = 0;      // collectives: the group's sequence number (0 while enqueued);
                         // p2p: 1, 2, ... per (group, peer, direction)
  uint64_t count = 0;    // elements (per rank for allgather / reduce-scatter)
  uint64_t numBytes = 0; // this rank's bytes: count * element size; p2p: the message
  uint64_t tag = 0;      // p2p tag
  int32_t peer = -1;     // p2p: the peer's group rank; broadcast: the root; else -1
  Op op = Op::kBarrier;
  DType dtype = DType::kUInt8;
  ReduceOp reduceOp = ReduceOp::kSum;
};

// One record read back out of the ring (times in ticks, 0 = not reached).
struct Entry {
  uint64_t id = 0;
  uint32_t lane = 0;
  OpInfo info;
  State state = State::kEnqueued;
  uint64_t enqueueTicks = 0, startTicks = 0, endTicks = 0;
};

struct GroupInfo {
  std::string name;             // equal on every member ("world", "group/0,1/0")
  std::vector<int> worldRanks;  // member i's world rank
  int groupRank = 0;            // this process's rank in the group
};

// A failure this process observed (a dump explains it); kept for every later dump.
struct FailureEvent {
  std::string trigger;  // "timeout" | "mismatch" | "network" | "error"
  std::string group;    // group name ("" when not known)
  std::string op;       // e.g. "allreduce seq=6 float32 sum count=1024"
  std::string message;  // the error's text
};

struct Slot;  // one record's storage in a ring (the recorder's; defined below)

// Identifies a record for later state changes; id 0: nothing was recorded. `slot` saves
// finish() the lane and index look-ups (the ring never moves while the recorder lives).
struct Ticket {
  uint64_t id = 0;
  uint32_t lane = 0;
  Slot* slot = nullptr;
};

// The clock of a snapshot: ticks -> Unix nanoseconds.
struct ClockInfo {
  std::string source;       // "ticker" | "coarse" | "tsc" | "steady_clock"
  // How much earlier than the truth a recorded time may be: the coarse clock's tick; the
  // ticker's period or its largest gap between two stores so far (more under load).
  int64_t resolutionNs = 1;
  double ticksPerNs = 1.0;
  uint64_t nowTicks = 0;    // when the snapshot was taken
  int64_t nowUnixNs = 0;
  int64_t nowSteadyNs = 0;
  // Unix nanoseconds of a tick value (0 stays 0: not reached).
  int64_t unixNs(uint64_t ticks) const;
};

struct Snapshot {
  size_t capacity = 0;        // records kept per lane (the newest `capacity` ones)
  uint64_t recorded = 0;      // records ever made, all lanes
  bool wrapped = false;       // some lane lost records (made more than `capacity`)
  // Oldest first by enqueue time, a lane's records in their order; records of different
  // lanes within one clock tick (the coarse clock's 1-4 ms) in lane order, not necessarily
  // the order they were made (match records by group and sequence number, as the analysis
  // does). A record being written at that instant is left out.
  std::vector<Entry> entries;
  std::vector<GroupInfo> groups;  // by index
  std::vector<FailureEvent> failures;
  ClockInfo clock;
};

class Recorder {
 public:
  // Keeps the newest `capacity` (>= 1) records; allocates the whole ring now. kTicker holds
  // a reference to the process's ticker thread while the recorder lives (the coarse clock
  // when no thread can be started).
  explicit Recorder(size_t capacity, Clock clock = Clock::kTicker);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  size_t capacity() const { return capacity_; }

  // Returns the group's index for OpInfo::group. Thread-safe; not on the hot path.
  uint32_t registerGroup(std::string name, std::vector<int> worldRanks, int groupRank);

  // Private lanes (thread-safe, not on the hot path; the lane's ring is allocated on first
  // use). 0 when every lane is taken: the caller records into the shared lane. A released
  // lane keeps its records for snapshots and is handed out again later.
  static constexpr uint32_t kMaxLanes = 64;
  uint32_t acquireLane();
  void releaseLane(uint32_t lane);

  // Hot path (lock-free, no allocation). record() stamps the enqueue time, and the start
  // time too when `state` is kStarted. `lane`: 0 (shared) or one acquireLane() returned to
  // this caller, whose records must not overlap.
  __attribute__((always_inline)) inline Ticket record(const OpInfo& info, State state, uint32_t lane = 0);
  // Enqueued -> started, with the sequence number assigned when it runs. False when the
  // record is gone (its slot was reused): the caller records a new one.
  bool start(Ticket ticket, uint64_t seq);
  // -> completed (ok) or failed, with the end time. A gone record is left alone.
  __attribute__((always_inline)) inline void finish(Ticket ticket, bool ok);

  // Failures: remembered for every later snapshot, then handed to the handler (the
  // runtime's dumper) on the calling thread, before the caller rethrows. Never throws.
  using FailureHandler = std::function<void(const FailureEvent&)>;
  void setFailureHandler(FailureHandler handler);
  void reportFailure(FailureEvent event) noexcept;

  // A consistent copy of the ring, the groups and the failures. Never blocks writers.
  Snapshot snapshot() const;

  // The hot path's clock (public for tests and benchmarks).
  uint64_t nowTicks() const {
    if (__builtin_expect(source_ == Source::kTicker, 1)) return tickerNowNs();
    if (source_ == Source::kCoarse) return coarseTicks();
    return preciseTicks();
  }

 private:
  struct Ring;
  // CLOCK_MONOTONIC_COARSE in nanoseconds, through coarseClockGettime_.
  static uint64_t coarseTicks() {
    struct timespec ts {};
    coarseClockGettime_.load(std::memory_order_relaxed)(CLOCK_MONOTONIC_COARSE, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
  }
  // The vDSO's own clock_gettime once the first recorder found it (saves glibc's wrapper,
  // ~0.8 ns a read here), else glibc's. Set once; relaxed: any of the two is right.
  using ClockGettime = int (*)(clockid_t, struct timespec*);
  static std::atomic<ClockGettime> coarseClockGettime_;
  uint64_t preciseTicks() const;
  bool readSlot(const Slot& slot, Entry* out) const;
  ClockInfo clockNow() const;

  const size_t capacity_;
  const uint64_t mask_;  // ring size (a power of two >= capacity) - 1
  // [0]: the shared lane; [1..kMaxLanes]: private ones, created by acquireLane (never freed
  // before the recorder, so writers and readers never see one go).
  std::atomic<Ring*> lanes_[kMaxLanes + 1] = {};
  std::vector<std::unique_ptr<Ring>> ownedRings_;  // under mu_
  std::vector<bool> laneTaken_;                    // under mu_, [lane]
  enum class Source : uint8_t { kTicker, kCoarse, kTsc, kSteady };
  Source source_ = Source::kCoarse;
  uint64_t anchorTicks_ = 0;  // at construction, to calibrate the TSC
  int64_t anchorSteadyNs_ = 0;
  mutable std::mutex mu_;  // groups_, failures_, handler_, lanes
  std::vector<GroupInfo> groups_;
  std::vector<FailureEvent> failures_;
  FailureHandler handler_;
};

// One record. `version` is a sequence lock: 2*id - 1 while the record is written, 2*id
// once it is complete (0: never written); writers order it with release stores and
// fences only (plain stores on x86-64), readers with acquire loads. Every field is an
// atomic so that a reader racing a writer is well defined; the version tells it whether
// what it read is whole. `state` has a byte of its own so that finish() only stores.
struct Slot {
  std::atomic<uint64_t> version{0};
  std::atomic<uint64_t> packed{0};  // group (32 bits) | op | dtype | reduceOp (8 bits each), op highest
  std::atomic<uint64_t> seq{0}, count{0}, numBytes{0}, tag{0};
  std::atomic<uint64_t> enqueueTicks{0}, startTicks{0}, endTicks{0};
  std::atomic<int32_t> peer{-1};
  std::atomic<uint8_t> state{0};
};

// One lane's ring. `next` (ids handed out) on its own cache line: the shared lane's is
// the one atomic every writer touches.
struct Recorder::Ring {
  explicit Ring(size_t slots) : slots(new Slot[slots]) {}
  std::unique_ptr<Slot[]> slots;
  alignas(64) std::atomic<uint64_t> next{0};
};

Ticket Recorder::record(const OpInfo& info, State state, uint32_t lane) {
  Ring& ring = *lanes_[lane].load(std::memory_order_acquire);
  uint64_t id;
  if (lane == 0) {
    id = ring.next.fetch_add(1, std::memory_order_relaxed) + 1;
  } else {  // one writer at a time: no read-modify-write needed
    id = ring.next.load(std::memory_order_relaxed) + 1;
    ring.next.store(id, std::memory_order_relaxed);
  }
  Slot& s = ring.slots[(id - 1) & mask_];
  __builtin_prefetch(&ring.slots[id & mask_], 1);  // the next record's slot, for writing
  const uint64_t now = nowTicks();
  s.version.store(2 * id - 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.packed.store(uint64_t{info.group} << 32 | uint64_t{static_cast<uint8_t>(info.op)} << 16 |
                     uint64_t{static_cast<uint8_t>(info.dtype)} << 8 | static_cast<uint8_t>(info.reduceOp),
                 std::memory_order_relaxed);
  s.state.store(static_cast<uint8_t>(state), std::memory_order_relaxed);
  s.peer.store(info.peer, std::memory_order_relaxed);
  s.seq.store(info.seq, std::memory_order_relaxed);
  s.count.store(info.count, std::memory_order_relaxed);
  s.numBytes.store(info.numBytes, std::memory_order_relaxed);
  s.tag.store(info.tag, std::memory_order_relaxed);
  s.enqueueTicks.store(now, std::memory_order_relaxed);
  s.startTicks.store(state == State::kEnqueued ? 0 : now, std::memory_order_relaxed);
  s.endTicks.store(0, std::memory_order_relaxed);
  s.version.store(2 * id, std::memory_order_release);
  return Ticket{id, lane, &s};
}

// See start() (flight_recorder.cpp) for the race with a writer that reuses the slot.
void Recorder::finish(Ticket ticket, bool ok) {
  Slot* s = ticket.slot;
  if (s == nullptr || s->version.load(std::memory_order_relaxed) != 2 * ticket.id) return;
  const uint64_t now = nowTicks();
  s->version.store(2 * ticket.id - 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s->state.store(static_cast<uint8_t>(ok ? State::kCompleted : State::kFailed), std::memory_order_relaxed);
  s->endTicks.store(now, std::memory_order_relaxed);
  s->version.store(2 * ticket.id, std::memory_order_release);
}

}  // namespace strata::collectives::flight
