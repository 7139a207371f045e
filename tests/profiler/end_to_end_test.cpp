// End to end on the real clock and the real /proc: two ranks' sessions (rank 0 runs the
// system sampler at 50 ms) for about 300 ms, steps and slices recorded from several
// threads, then everything read back with our readers and merged for Perfetto.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>

#include "profiler/layout.h"
#include "profiler/session.h"
#include "profiler/step_times.h"
#include "profiler/system_reader.h"
#include "profiler/timeline_reader.h"
#include "profiler/trace_merge.h"
#include "profiler_test_util.h"
#include "strata/profiler.h"
#include "trace_check.h"

namespace strata::profiler {
namespace {

using namespace std::chrono_literals;
constexpr int kSteps = 15;  // ~20 ms each

SessionInfo rankInfo(const std::string& dir, int rank) {
  SessionInfo i;
  i.outputDir = dir;
  i.rank = rank;
  i.worldSize = 2;
  i.hostIndex = 0;
  i.hostname = "e2e-host";
  i.runSystemSampler = rank == 0;  // local rank 0 only
  i.makeCurrent = rank == 0;
  return i;
}

void trainingThread(Session& s) {
  for (int step = 0; step < kSteps; ++step) {
    {
      STRATA_PROFILE("load batch");
      std::this_thread::sleep_for(2ms);
    }
    s.stepBegin(step);
    {
      ScopedSlice forward("forward", phases::kForward, Track::kCompute);
      std::this_thread::sleep_for(8ms);
    }
    {
      ScopedSlice backward("backward", phases::kBackward, Track::kCompute);
      std::this_thread::sleep_for(8ms);
    }
    s.stepEnd(step);
  }
}

void commThread(Session& s) {
  for (int bucket = 0; bucket < kSteps; ++bucket) {
    const int64_t start = s.nowUs();
    std::this_thread::sleep_for(5ms);
    s.recordSlice("allreduce", phases::kAllReduce, Track::kCommunication, start,
                  s.nowUs() - start, {{"bucket", bucket}, {"bytes", 1 << 20}});
    std::this_thread::sleep_for(12ms);
  }
}

void otherRank(Session& s) {
  for (int step = 0; step < kSteps; ++step) {
    s.stepBegin(step);
    {
      ScopedSlice forward(&s, "forward", phases::kForward, Track::kCompute);
      std::this_thread::sleep_for(18ms);
    }
    s.stepEnd(step);
  }
}

void checkSystemMetrics(const std::string& root) {
  SystemMetricsReader reader(root);
  ASSERT_FALSE(reader.fileStampsUs().empty());
  for (int64_t stamp : reader.fileStampsUs()) EXPECT_EQ(stamp % 60'000'000, 0) << "minute files";
  const auto events = reader.events({});
  std::map<int64_t, std::set<std::string>> coresAt;  // timestamp -> cores sampled
  std::set<std::string> cores, names;
  for (const SystemEvent& e : events) {
    EXPECT_EQ(e.nodeId, "algo-1");
    names.insert(e.type + "/" + e.name + "/" + e.dimension);
    if (e.dimension == "CPUUtilization") {
      EXPECT_GE(e.value, 0.0);
      EXPECT_LE(e.value, 100.0);
      coresAt[e.timestampUs].insert(e.name);
      cores.insert(e.name);
    }
  }
  EXPECT_GE(coresAt.size(), 3u) << "samples in ~300 ms at 50 ms";
  for (const auto& [ts, sampled] : coresAt) EXPECT_EQ(sampled, cores) << "one timestamp per sample";
  EXPECT_TRUE(names.count("memory/MemoryUsedPercent/"));
  EXPECT_TRUE(names.count("cpu/cpu0/I/OWaitPercentage"));
  EXPECT_TRUE(names.count("network/ReceiveBytesPerSecond/Algorithm"));
}

void checkTimeline(const std::string& root) {
  TimelineReader reader(root);
  EXPECT_EQ(reader.files().size(), 2u);  // one closed file per rank
  for (int rank : {0, 1}) {
    TraceQuery q;
    q.rank = rank;
    q.phase = "Step:ModeKeys.TRAIN";
    const auto steps = reader.events(q);
    ASSERT_EQ(steps.size(), static_cast<size_t>(kSteps)) << "rank " << rank;
    for (int i = 0; i < kSteps; ++i) {
      EXPECT_EQ(steps[i].stepNum(), i);
      EXPECT_EQ(steps[i].nodeId, "algo-1-" + std::to_string(rank));
      EXPECT_GE(steps[i].durUs, 15000);
    }
  }
  TraceQuery q;
  q.phase = phases::kAllReduce;
  const auto comm = reader.events(q);
  ASSERT_EQ(comm.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(comm[3].args["bucket"], 3);
  EXPECT_EQ(comm[3].tid, trackId(Track::kCommunication));
  q.phase = phases::kUserRange;
  EXPECT_EQ(reader.events(q).size(), static_cast<size_t>(kSteps));
  q.phase = phases::kForward;
  EXPECT_EQ(reader.events(q).size(), 2u * kSteps);
}

TEST(EndToEnd, TwoRanksLeaveSystemAndFrameworkFilesOurReadersAndPerfettoAccept) {
  testing::TempDir dir;
  config::ProfilerConfig cfg;
  cfg.systemMonitorInterval = 50ms;
  cfg.frameworkProfile = config::FrameworkProfile{};
  cfg.frameworkProfile->startStep = 0;
  cfg.frameworkProfile->numSteps = 1000;
  auto rank0 = Session::start(cfg, rankInfo(dir.str(), 0));
  auto rank1 = Session::start(cfg, rankInfo(dir.str(), 1));
  std::thread comm(commThread, std::ref(*rank0));
  std::thread other(otherRank, std::ref(*rank1));
  trainingThread(*rank0);
  comm.join();
  other.join();
  rank0->stop();
  rank1->stop();
  EXPECT_TRUE(markTrainingJobEnd(dir.str()));

  const std::string root = profilerRoot(dir.str());
  EXPECT_GE(rank0->stats().systemSamples, 3u);
  EXPECT_EQ(rank0->stats().eventsDropped, 0u);
  checkSystemMetrics(root);
  checkTimeline(root);

  const auto steps = readStepTimes(root);
  ASSERT_EQ(steps.size(), 2u * kSteps);
  EXPECT_EQ(steps.front().rank, 0);
  EXPECT_EQ(steps.back().rank, 1);

  const MergedTrace merged = mergeTimelines(root);
  EXPECT_EQ(merged.report.ranks, 2u);
  EXPECT_EQ(merged.report.movedForNesting, 0u) << "our tracks nest by construction";
  std::ostringstream text;
  writeMergedTrace(merged, text);
  EXPECT_EQ(testing::perfettoProblems(nlohmann::json::parse(text.str())),
            std::vector<std::string>{});
  EXPECT_TRUE(std::filesystem::exists(root + "/system/training_job_end.ts"));
}

}  // namespace
}  // namespace strata::profiler
