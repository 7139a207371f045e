// Publishing checkpoints across ranks without collectives (the background writer's path):
// the pure publication decision, the store protocol with ranks as threads over an in-memory
// store (all ranks succeed; one rank fails; one never reports; rank 0 cannot prepare the
// directory), and the background thread (named, one job at a time, exceptions and stop
// signals kept inside).
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/store.h"
#include "checkpoint/async_publish.h"
#include "checkpoint/background_writer.h"
#include "checkpoint/catalog.h"
#include "checkpoint/publication.h"
#include "checkpoint/writer.h"
#include "strata/errors.h"

namespace strata::checkpoint {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

ShardRecord wrote(int rank, uint64_t bytes) {
  ShardRecord r = makeShardRecord(rank, 0);
  markWritten(r, ShardInfo{"x", rank, 0, bytes, std::string(64, static_cast<char>('a' + rank))});
  return r;
}

ShardRecord failed(int rank, const std::string& error) {
  ShardRecord r = makeShardRecord(rank, 0);
  markFailed(r, error);
  return r;
}

ManifestHeader header(Kind kind, int worldSize) {
  ManifestHeader h;
  h.step = 40;
  h.epoch = 2;
  h.kind = kind;
  h.worldSize = worldSize;
  h.ppSize = 1;
  return h;
}

struct DecisionCase {
  const char* name;
  Kind kind;
  int worldSize;
  std::vector<ShardRecord> records;
  bool publish;
  std::string whyContains;  // when refused
  std::vector<std::string> files;  // when published
};

TEST(PublicationDecision, Table) {
  const std::vector<DecisionCase> cases = {
      {"full, rank 0 wrote", Kind::kFull, 2, {wrote(0, 10), makeShardRecord(1, 0)}, true, "", {"model.pt"}},
      {"partial, every rank wrote", Kind::kPartial, 3, {wrote(0, 1), wrote(1, 2), wrote(2, 3)}, true, "",
       {"rank-00000.pt", "rank-00001.pt", "rank-00002.pt"}},
      {"one rank failed", Kind::kPartial, 3, {wrote(0, 1), failed(1, "disk full"), wrote(2, 3)}, false,
       "failed on rank 1: disk full", {}},
      {"the lowest failing rank is named", Kind::kPartial, 3, {wrote(0, 1), failed(1, "a"), failed(2, "b")}, false,
       "failed on rank 1: a", {}},
      {"a rank's record missing", Kind::kPartial, 3, {wrote(0, 1), wrote(1, 2)}, false,
       "expected a record from each of 3 ranks, got 2", {}},
      {"partial, a rank wrote nothing", Kind::kPartial, 2, {wrote(0, 1), makeShardRecord(1, 0)}, false,
       "rank 1 wrote no shard", {}},
      {"full, another rank wrote", Kind::kFull, 2, {wrote(0, 1), wrote(1, 1)}, false,
       "rank 1 wrote a shard of a full checkpoint", {}},
      {"full, rank 0 wrote nothing", Kind::kFull, 1, {makeShardRecord(0, 0)}, false, "rank 0 wrote no shard", {}},
      {"records out of order", Kind::kPartial, 2, {wrote(1, 1), wrote(0, 1)}, false, "slot 0 names rank 1", {}},
  };
  for (const auto& c : cases) {
    const PublishDecision d = decidePublication(c.records, header(c.kind, c.worldSize));
    EXPECT_EQ(d.publish, c.publish) << c.name << ": " << d.why;
    if (!c.publish) {
      EXPECT_NE(d.why.find(c.whyContains), std::string::npos) << c.name << ": " << d.why;
      continue;
    }
    std::vector<std::string> files;
    for (const auto& s : d.manifest.shards) files.push_back(s.file);
    EXPECT_EQ(files, c.files) << c.name;
    EXPECT_EQ(d.manifest.step, 40);
    EXPECT_EQ(d.manifest.epoch, 2);
    EXPECT_EQ(d.manifest.worldSize, c.worldSize);
    EXPECT_EQ(d.manifest.shards.front().sha256, std::string(64, 'a')) << c.name;
  }
}

TEST(PublicationDecision, LongErrorsAreCutToTheRecord) {
  const ShardRecord r = failed(3, std::string(1000, 'e') + "tail");
  EXPECT_EQ(errorOf(r), std::string(sizeof(r.error) - 1, 'e'));
  EXPECT_EQ(errorOf(failed(0, "")), "unknown error");
}

class TempRoot {
 public:
  TempRoot() : path_((fs::temp_directory_path() / ("strata-ckpt-pub-" + std::to_string(getpid()) + "-" +
                                                   std::to_string(counter_++))).string()) {
    fs::remove_all(path_);
  }
  ~TempRoot() { fs::remove_all(path_); }
  const std::string& str() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

// Every rank (a thread) runs the protocol for one save; returns the results by rank.
// `shardOf(rank)` gives a rank's shard payload, or nullopt for no shard; `throwOn` makes a
// rank's shard writer fail; ranks in `absent` never take part.
std::vector<PublishResult> publishAll(const std::string& root, int64_t step, Kind kind, int worldSize,
                                      const std::string& key, int throwOn = -1, std::vector<int> absent = {},
                                      milliseconds timeout = milliseconds(30000), int keep = 0,
                                      std::function<bool()> abandon = nullptr) {
  auto store = bootstrap::makeHashStore();
  std::vector<PublishResult> results(worldSize);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < worldSize; ++rank) {
    if (std::find(absent.begin(), absent.end(), rank) != absent.end()) continue;
    threads.emplace_back([&, rank] {
      PublishJob job;
      job.root = root;
      job.header = header(kind, worldSize);
      job.header.step = step;
      job.rank = rank;
      job.keep = keep;
      job.key = key;
      job.timeout = timeout;
      job.abandon = abandon;
      if (kind == Kind::kPartial || rank == 0) {
        job.writeShard = [rank, throwOn, kind](const std::string& dir) {
          if (rank == throwOn) throw Error("[r" + std::to_string(rank) + "] no space left on device");
          const std::string file = kind == Kind::kPartial ? partialShardFile(rank) : kFullShardFile;
          return writeShard(dir, file, [rank](const ByteSink& sink) {
            const std::string bytes = "payload of rank " + std::to_string(rank);
            sink(bytes.data(), bytes.size());
          });
        };
      }
      results[rank] = publishThroughStore(*store, job);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

TEST(PublishThroughStore, EveryRankWritesThenRankZeroCommitsTheManifest) {
  TempRoot root;
  const auto results = publishAll(root.str(), 7, Kind::kPartial, 3, "k1");
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(results[r].ok) << "rank " << r << ": " << results[r].error;
    EXPECT_EQ(results[r].dir, root.str() + "/step-000000000007");
  }
  const Verdict v = verifyCheckpoint(results[0].dir);
  ASSERT_TRUE(v.complete) << v.why;
  ASSERT_EQ(v.manifest.shards.size(), 3u);
  EXPECT_EQ(v.manifest.shards[2].file, "rank-00002.pt");
  EXPECT_FALSE(v.manifest.createdUtc.empty());
}

TEST(PublishThroughStore, FullCheckpointHasRankZerosShardOnly) {
  TempRoot root;
  const auto results = publishAll(root.str(), 3, Kind::kFull, 2, "k2");
  EXPECT_TRUE(results[0].ok && results[1].ok) << results[0].error << results[1].error;
  const Verdict v = verifyCheckpoint(results[0].dir);
  ASSERT_TRUE(v.complete) << v.why;
  ASSERT_EQ(v.manifest.shards.size(), 1u);
  EXPECT_EQ(v.manifest.shards[0].file, "model.pt");
}

TEST(PublishThroughStore, AFailingRankLeavesNoManifestEveryRankGetsItsErrorAndThePreviousStaysNewest) {
  TempRoot root;
  ASSERT_TRUE(publishAll(root.str(), 5, Kind::kPartial, 3, "prev")[0].ok);
  const auto results = publishAll(root.str(), 10, Kind::kPartial, 3, "next", /*throwOn=*/2);
  for (int r = 0; r < 3; ++r) {
    EXPECT_FALSE(results[r].ok) << "rank " << r;
    EXPECT_EQ(results[r].error, results[0].error) << "every rank has the same outcome";
  }
  EXPECT_NE(results[0].error.find("failed on rank 2: writing its shard: [r2] no space left on device"),
            std::string::npos)
      << results[0].error;
  EXPECT_FALSE(fs::exists(root.str() + "/step-000000000010/manifest.json"));
  const auto found = findNewestComplete(root.str());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->manifest.step, 5);
}

TEST(PublishThroughStore, ARankThatNeverReportsIsNamedWithinTheTimeout) {
  TempRoot root;
  const auto results = publishAll(root.str(), 4, Kind::kPartial, 2, "k3", -1, /*absent=*/{1}, milliseconds(300));
  EXPECT_FALSE(results[0].ok);
  EXPECT_NE(results[0].error.find("failed on rank 1: it did not report its shard within 300 ms"), std::string::npos)
      << results[0].error;
  EXPECT_FALSE(fs::exists(root.str() + "/step-000000000004/manifest.json"));
}

// The job failed (a dead peer): waits end at the next check instead of the timeout.
TEST(PublishThroughStore, WaitsAreAbandonedWhenTheJobFailed) {
  TempRoot root;
  const auto results = publishAll(root.str(), 4, Kind::kPartial, 2, "k5", -1, /*absent=*/{1}, milliseconds(600000), 0,
                                  [] { return true; });
  EXPECT_FALSE(results[0].ok);
  EXPECT_NE(results[0].error.find("failed on rank 1: it did not report its shard"), std::string::npos)
      << results[0].error;
  EXPECT_NE(results[0].error.find("gave up waiting for k5/shard/1: the job failed"), std::string::npos)
      << results[0].error;
}

TEST(PublishThroughStore, RankZeroCannotPrepareTheDirectoryNobodyWrites) {
  TempRoot root;
  fs::create_directories(fs::path(root.str()).parent_path());
  std::ofstream(root.str()) << "a file where the checkpoint root should be";
  const auto results = publishAll(root.str(), 2, Kind::kPartial, 2, "k4");
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(results[r].ok);
    EXPECT_NE(results[r].error.find("failed on rank 0: preparing the directory"), std::string::npos)
        << results[r].error;
  }
  fs::remove(root.str());
}

TEST(PublishThroughStore, PrunesToKeepAfterPublishing) {
  TempRoot root;
  for (int64_t step : {1, 2, 3}) ASSERT_TRUE(publishAll(root.str(), step, Kind::kFull, 2, "p" + std::to_string(step), -1, {}, milliseconds(30000), 2)[0].ok);
  const auto entries = listCheckpoints(root.str());
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].step, 3);
  EXPECT_EQ(entries[1].step, 2);
}

PublishResult okResult(int64_t step) {
  PublishResult r;
  r.ok = true;
  r.step = step;
  return r;
}

TEST(BackgroundWriter, RunsJobsOnANamedThreadWithStopSignalsBlocked) {
  BackgroundWriter writer("strata-ckpt");
  std::string name;
  bool sigtermBlocked = false;
  writer.submit(
      [&] {
        char buffer[16] = {};
        pthread_getname_np(pthread_self(), buffer, sizeof(buffer));
        name = buffer;
        sigset_t mask;
        pthread_sigmask(SIG_SETMASK, nullptr, &mask);
        sigtermBlocked = sigismember(&mask, SIGTERM) == 1 && sigismember(&mask, SIGINT) == 1;
        return okResult(1);
      },
      1);
  const auto r = writer.wait();
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->ok);
  EXPECT_EQ(name, "strata-ckpt");
  EXPECT_TRUE(sigtermBlocked);
  EXPECT_FALSE(writer.wait().has_value()) << "a result is returned once";
}

TEST(BackgroundWriter, OneJobInFlightAndExceptionsStayOnTheThread) {
  BackgroundWriter writer;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  writer.submit(
      [released] {
        released.wait();
        return okResult(5);
      },
      5);
  EXPECT_TRUE(writer.busy());
  EXPECT_EQ(writer.stepInFlight(), 5);
  EXPECT_THROW(writer.submit([] { return okResult(6); }, 6), Error);
  release.set_value();
  EXPECT_EQ(writer.wait()->step, 5);
  EXPECT_FALSE(writer.busy());

  writer.submit([]() -> PublishResult { throw Error("boom in the writer"); }, 7);
  const auto r = writer.wait();
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->ok);
  EXPECT_EQ(r->step, 7);
  EXPECT_NE(r->error.find("boom in the writer"), std::string::npos);
}

TEST(BackgroundWriter, ShutdownWaitsForTheJobInFlightAndKeepsItsResult) {
  BackgroundWriter writer;
  std::atomic<bool> finished{false};
  std::promise<void> started;
  writer.submit(
      [&] {
        started.set_value();
        std::this_thread::sleep_for(milliseconds(50));
        finished = true;
        return okResult(9);
      },
      9);
  started.get_future().wait();
  writer.shutdown();
  EXPECT_TRUE(finished.load());
  EXPECT_EQ(writer.wait()->step, 9);
  EXPECT_THROW(writer.submit([] { return okResult(10); }, 10), Error);
  writer.shutdown();  // idempotent
}

}  // namespace
}  // namespace strata::checkpoint
