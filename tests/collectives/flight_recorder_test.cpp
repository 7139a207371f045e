// The flight recorder's ring (states, wrapping, concurrent writers against a reader) and
// what a Communicator records. Its dump format read back: tests/cli/flight/dump_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/flight_recorder.h"
#include "strata/errors.h"
#include "testing/rank_harness.h"

namespace strata::collectives::flight {
namespace {

OpInfo allreduceInfo(uint64_t seq, uint64_t count = 16) {
  OpInfo info;
  info.seq = seq;
  info.count = count;
  info.numBytes = count * 4;
  info.op = Op::kAllReduce;
  info.dtype = DType::kFloat32;
  return info;
}

class FlightRecorderClocks : public ::testing::TestWithParam<Clock> {};

TEST_P(FlightRecorderClocks, RecordsStateChangesAndTimes) {
  Recorder rec(8, GetParam());
  const auto before = std::chrono::system_clock::now().time_since_epoch();
  const Ticket queued = rec.record(allreduceInfo(0), State::kEnqueued);
  const Ticket now = rec.record(allreduceInfo(1), State::kStarted);
  ASSERT_TRUE(rec.start(queued, 2));
  rec.finish(now, true);
  rec.finish(queued, false);
  const Snapshot snap = rec.snapshot();
  ASSERT_EQ(snap.entries.size(), 2u);
  EXPECT_EQ(snap.recorded, 2u);
  const Entry& a = snap.entries[0];
  const Entry& b = snap.entries[1];
  EXPECT_EQ(a.id, 1u);
  EXPECT_EQ(a.info.seq, 2u);
  EXPECT_EQ(a.state, State::kFailed);
  EXPECT_EQ(b.info.seq, 1u);
  EXPECT_EQ(b.state, State::kCompleted);
  EXPECT_EQ(b.info.numBytes, 64u);
  // Enqueued before it started (it waited for b), and every time is between then and now.
  EXPECT_LE(a.enqueueTicks, b.startTicks);
  EXPECT_LE(b.startTicks, a.startTicks);
  EXPECT_LE(a.startTicks, a.endTicks);
  // Conversion slack: the clock's resolution (a coarse clock lags by up to a tick) + 5 ms.
  const int64_t slack = snap.clock.resolutionNs + 5000000;
  const int64_t startNs = std::chrono::duration_cast<std::chrono::nanoseconds>(before).count();
  for (const Entry& e : snap.entries) {
    EXPECT_GE(snap.clock.unixNs(e.enqueueTicks), startNs - slack);
    EXPECT_LE(snap.clock.unixNs(e.endTicks), snap.clock.nowUnixNs + slack);
  }
}

// Times convert to Unix time at the clock's scale: records 30 ms apart are 30 ms apart.
TEST_P(FlightRecorderClocks, ConvertsTicksAtTheRightRate) {
  Recorder rec(4, GetParam());
  const Ticket a = rec.record(allreduceInfo(1), State::kStarted);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  rec.finish(a, true);
  const Snapshot snap = rec.snapshot();
  ASSERT_EQ(snap.entries.size(), 1u);
  const double ms = static_cast<double>(snap.clock.unixNs(snap.entries[0].endTicks) -
                                        snap.clock.unixNs(snap.entries[0].startTicks)) / 1e6;
  EXPECT_GE(ms, 30.0 - 2.0 * static_cast<double>(snap.clock.resolutionNs) / 1e6) << snap.clock.source;
  EXPECT_EQ(snap.clock.source == "coarse", GetParam() == Clock::kCoarse);
  EXPECT_EQ(snap.clock.source == "ticker", GetParam() == Clock::kTicker);
}

INSTANTIATE_TEST_SUITE_P(All, FlightRecorderClocks, ::testing::Values(Clock::kTicker, Clock::kCoarse, Clock::kPrecise),
                         [](const ::testing::TestParamInfo<Clock>& info) {
                           return std::string(info.param == Clock::kTicker   ? "Ticker"
                                              : info.param == Clock::kCoarse ? "Coarse"
                                                                             : "Precise");
                         });

// The coarse clock is read through the vDSO's function when the recorder finds it: it must
// tell the same time as glibc's clock_gettime (the reference), read just before and after.
TEST(FlightRecorder, CoarseTicksAreGlibcsCoarseClock) {
  Recorder rec(4, Clock::kCoarse);
  auto glibcNs = [] {
    struct timespec ts {};
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
  };
  for (int i = 0; i < 100; ++i) {
    const uint64_t before = glibcNs();
    const uint64_t ticks = rec.nowTicks();
    const uint64_t after = glibcNs();
    EXPECT_LE(before, ticks) << "read " << i;
    EXPECT_LE(ticks, after) << "read " << i;
  }
}

TEST(FlightRecorder, KeepsTheNewestCapacityRecords) {
  Recorder rec(5);  // a ring of 8 slots, 5 kept
  for (uint64_t s = 1; s <= 13; ++s) rec.finish(rec.record(allreduceInfo(s), State::kStarted), true);
  const Snapshot snap = rec.snapshot();
  EXPECT_EQ(snap.recorded, 13u);
  EXPECT_EQ(snap.capacity, 5u);
  ASSERT_EQ(snap.entries.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(snap.entries[i].id, 9 + i);
    EXPECT_EQ(snap.entries[i].info.seq, 9 + i);
  }
}

// A communicator's collectives go to its own lane: ids count per lane, each lane keeps its
// newest `capacity` records, and a snapshot is one history ordered by time.
TEST(FlightRecorder, PrivateLanesKeepTheirRecordsInOneHistory) {
  Recorder rec(3);
  const uint32_t a = rec.acquireLane(), b = rec.acquireLane();
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  ASSERT_NE(a, b);
  for (uint64_t s = 1; s <= 5; ++s) rec.finish(rec.record(allreduceInfo(s), State::kStarted, a), true);
  const Ticket p2p = rec.record(allreduceInfo(100), State::kEnqueued);  // shared lane
  const Ticket inB = rec.record(allreduceInfo(200), State::kStarted, b);
  EXPECT_EQ(inB.lane, b);
  EXPECT_EQ(inB.id, 1u);
  ASSERT_TRUE(rec.start(p2p, 101));
  rec.finish(inB, false);
  const Snapshot snap = rec.snapshot();
  EXPECT_EQ(snap.recorded, 7u);
  EXPECT_TRUE(snap.wrapped);
  std::vector<uint64_t> seqs;
  for (const Entry& e : snap.entries) seqs.push_back(e.info.seq);
  // Lane a's newest 3 (3, 4, 5, in their order), the shared lane's and b's.
  std::vector<uint64_t> ofA;
  for (uint64_t s : seqs)
    if (s <= 5) ofA.push_back(s);
  EXPECT_EQ(ofA, (std::vector<uint64_t>{3, 4, 5}));
  std::sort(seqs.begin(), seqs.end());
  EXPECT_EQ(seqs, (std::vector<uint64_t>{3, 4, 5, 101, 200}));
  for (size_t i = 1; i < snap.entries.size(); ++i)
    EXPECT_LE(snap.entries[i - 1].enqueueTicks, snap.entries[i].enqueueTicks);
  for (const Entry& e : snap.entries) {
    if (e.info.seq == 101) {
      EXPECT_EQ(e.lane, 0u);
    }
    if (e.info.seq == 200) {
      EXPECT_EQ(e.state, State::kFailed);
    }
    if (e.info.seq <= 5) {
      EXPECT_EQ(e.lane, a);
    }
  }
  // Every lane taken: the shared one (0); a released lane is handed out again, records kept.
  std::vector<uint32_t> taken;
  for (uint32_t i = 2; i < Recorder::kMaxLanes; ++i) taken.push_back(rec.acquireLane());
  EXPECT_EQ(std::count(taken.begin(), taken.end(), 0u), 0);
  EXPECT_EQ(rec.acquireLane(), 0u);
  rec.releaseLane(a);
  EXPECT_EQ(rec.acquireLane(), a);
  EXPECT_EQ(rec.snapshot().entries.size(), 5u);
}

TEST(FlightRecorder, AGoneRecordIgnoresLateStateChanges) {
  Recorder rec(2);
  const Ticket old = rec.record(allreduceInfo(0), State::kEnqueued);
  rec.record(allreduceInfo(2), State::kStarted);
  rec.record(allreduceInfo(3), State::kStarted);  // takes old's slot
  EXPECT_FALSE(rec.start(old, 1));
  rec.finish(old, false);
  const Snapshot snap = rec.snapshot();
  ASSERT_EQ(snap.entries.size(), 2u);
  EXPECT_EQ(snap.entries[1].info.seq, 3u);
  EXPECT_EQ(snap.entries[1].state, State::kStarted);
}

// Writers fill records whose fields all derive from one number; a reader snapshots all
// the while. A torn record (fields of two writes) would break the relation.
TEST(FlightRecorder, ConcurrentWritersNeverShowATornRecord) {
  Recorder rec(64);
  constexpr int kWriters = 4;
  constexpr uint64_t kPerWriter = 20000;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> checked{0};
  std::atomic<bool> readerRunning{false};
  std::thread reader([&] {
    readerRunning = true;  // the writers start only now, so reading overlaps writing
    while (!done.load() || checked.load() == 0) {
      for (const Entry& e : rec.snapshot().entries) {
        const uint64_t k = e.info.seq;
        ASSERT_EQ(e.info.count, k * 3) << "torn record " << e.id;
        ASSERT_EQ(e.info.numBytes, k * 5);
        ASSERT_EQ(e.info.tag, k ^ 0x5a5a);
        ASSERT_EQ(e.info.peer, static_cast<int32_t>(k % 7));
        if (e.state == State::kCompleted) {
          ASSERT_GE(e.endTicks, e.startTicks);
        }
        checked.fetch_add(1);
      }
    }
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w)
    writers.emplace_back([&, w] {
      // Writers 0 and 1 in a private lane each (as two communicators), 2 and 3 share lane 0.
      const uint32_t lane = w < 2 ? rec.acquireLane() : 0;
      while (!readerRunning.load()) std::this_thread::yield();
      for (uint64_t i = 0; i < kPerWriter; ++i) {
        const uint64_t k = static_cast<uint64_t>(w) * kPerWriter + i + 1;
        OpInfo info;
        info.seq = k;
        info.count = k * 3;
        info.numBytes = k * 5;
        info.tag = k ^ 0x5a5a;
        info.peer = static_cast<int32_t>(k % 7);
        info.op = Op::kSend;
        rec.finish(rec.record(info, State::kStarted, lane), true);
      }
    });
  for (auto& t : writers) t.join();
  done = true;
  reader.join();
  const Snapshot last = rec.snapshot();
  EXPECT_EQ(last.recorded, kWriters * kPerWriter);
  EXPECT_EQ(last.entries.size(), 3 * 64u);  // the newest 64 of each lane
  EXPECT_GT(checked.load(), 0u);
}

TEST(FlightRecorder, FailuresReachTheHandlerAndEverySnapshot) {
  Recorder rec(4);
  std::vector<std::string> seen;
  rec.setFailureHandler([&](const FailureEvent& e) {
    seen.push_back(e.trigger + ":" + e.op);
    throw std::runtime_error("the dump failed");  // must not escape reportFailure
  });
  EXPECT_NO_THROW(rec.reportFailure(FailureEvent{"timeout", "world", "allreduce seq=3", "late"}));
  EXPECT_EQ(seen, std::vector<std::string>{"timeout:allreduce seq=3"});
  const Snapshot snap = rec.snapshot();
  ASSERT_EQ(snap.failures.size(), 1u);
  EXPECT_EQ(snap.failures[0].message, "late");
}

// What a group of real communicators records: collectives with equal seqs on every rank,
// a queued one taken over when it runs, sends and receives numbered per peer.
TEST(FlightCommunicator, RecordsCollectivesAndPointToPoint) {
  std::vector<std::shared_ptr<Recorder>> recorders = {std::make_shared<Recorder>(64), std::make_shared<Recorder>(64)};
  strata::testing::HarnessOptions o;
  o.kind = strata::testing::TransportKind::kShm;
  o.adjust = [&](int rank, CommOptions& co) { co.flight = recorders[static_cast<size_t>(rank)]; };
  strata::testing::runRanks(2, o, [](Communicator& c) {
    std::vector<float> x(256, 1.0f);
    c.allReduce(x.data(), x.data(), x.size(), DType::kFloat32, ReduceOp::kSum);
    const Ticket queued = c.flightEnqueued(CollKind::kBroadcast, 4, DType::kFloat32, ReduceOp::kSum, 0);
    c.broadcast(x.data(), 4, DType::kFloat32, 0, queued);
    const int peer = 1 - c.rank();
    auto send = c.postSend(x.data(), 64, peer, 5);
    auto recv = c.postRecv(x.data() + 128, 64, peer, 5);
    send->wait(std::chrono::seconds(30));
    recv->wait(std::chrono::seconds(30));
    c.barrier();
  });
  for (int r = 0; r < 2; ++r) {
    const Snapshot snap = recorders[static_cast<size_t>(r)]->snapshot();
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_EQ(snap.groups.size(), 1u);
    EXPECT_EQ(snap.groups[0].name, "world");
    ASSERT_EQ(snap.entries.size(), 5u);
    // The collectives are in the communicator's own lane, the queued broadcast and the
    // point-to-point ops in the shared one; within one clock tick the snapshot may list the
    // lanes in any order, so the records are found by op.
    std::map<Op, const Entry*> byOp;
    for (const Entry& e : snap.entries) byOp[e.info.op] = &e;
    ASSERT_EQ(byOp.size(), 5u);
    const Entry& ar = *byOp[Op::kAllReduce];
    EXPECT_NE(ar.lane, 0u);
    EXPECT_EQ(ar.info.seq, 1u);
    EXPECT_EQ(ar.info.numBytes, 1024u);
    EXPECT_EQ(byOp[Op::kBroadcast]->info.seq, 2u);  // the queued record took its seq when it ran
    EXPECT_EQ(byOp[Op::kBroadcast]->lane, 0u);
    EXPECT_LE(byOp[Op::kBroadcast]->enqueueTicks, byOp[Op::kBroadcast]->startTicks);
    EXPECT_EQ(byOp[Op::kSend]->info.seq, 1u);
    EXPECT_EQ(byOp[Op::kSend]->info.peer, 1 - r);
    EXPECT_EQ(byOp[Op::kRecv]->info.tag, 5u);
    EXPECT_EQ(byOp[Op::kBarrier]->info.seq, 3u);
    EXPECT_EQ(byOp[Op::kBarrier]->lane, ar.lane);
    for (size_t i = 1; i < snap.entries.size(); ++i)
      EXPECT_LE(snap.entries[i - 1].enqueueTicks, snap.entries[i].enqueueTicks);
    for (const Entry& e : snap.entries) EXPECT_EQ(e.state, State::kCompleted) << opName(e.info.op);
  }
}

// A mismatch is reported on every rank, before the error leaves the collective.
TEST(FlightCommunicator, MismatchIsReportedOnEveryRankBeforeTheThrow) {
  std::vector<std::shared_ptr<Recorder>> recorders = {std::make_shared<Recorder>(8), std::make_shared<Recorder>(8)};
  std::atomic<int> reported{0};
  for (auto& rec : recorders)
    rec->setFailureHandler([&](const FailureEvent& e) {
      EXPECT_EQ(e.trigger, "mismatch");
      EXPECT_EQ(e.group, "world");
      reported.fetch_add(1);
    });
  strata::testing::HarnessOptions o;
  o.kind = strata::testing::TransportKind::kShm;
  o.timeout = std::chrono::milliseconds(20000);
  o.adjust = [&](int rank, CommOptions& co) { co.flight = recorders[static_cast<size_t>(rank)]; };
  std::atomic<int> threw{0};
  strata::testing::runRanks(2, o, [&](Communicator& c) {
    std::vector<float> x(64, 1.0f);
    try {
      c.allReduce(x.data(), x.data(), c.rank() == 0 ? 16 : 32, DType::kFloat32, ReduceOp::kSum);
    } catch (const strata::MismatchError&) {
      threw.fetch_add(1);
    }
  });
  EXPECT_EQ(threw.load(), 2);
  EXPECT_EQ(reported.load(), 2);
  for (auto& rec : recorders) {
    const Snapshot snap = rec->snapshot();
    ASSERT_EQ(snap.entries.size(), 1u);
    EXPECT_EQ(snap.entries[0].state, State::kFailed);
    ASSERT_EQ(snap.failures.size(), 1u);
  }
}

}  // namespace
}  // namespace strata::collectives::flight
