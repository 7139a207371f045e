// The torch-free checkpoint core: manifests, SHA-256, atomic writes, the finder's fallback
// over incomplete and corrupted checkpoints, and pruning. Crashes are simulated by leaving
// exactly what a killed writer leaves behind (a temporary file, no manifest, a torn shard).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/atomic_file.h"
#include "checkpoint/catalog.h"
#include "checkpoint/manifest.h"
#include "checkpoint/sha256.h"
#include "checkpoint/writer.h"
#include "strata/errors.h"

namespace strata::checkpoint {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("strata-ckpt-core-" + std::to_string(getpid()) + "-" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::string readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A checkpoint with one shard per rank, written with the real protocol.
std::string writeCheckpoint(const std::string& root, int64_t step, int ranks, const std::string& payload) {
  const std::string dir = beginCheckpoint(root, step);
  Manifest m;
  m.step = step;
  m.epoch = step / 10;
  m.kind = Kind::kPartial;
  m.worldSize = ranks;
  m.dpSize = ranks;
  for (int r = 0; r < ranks; ++r) {
    ShardInfo s = writeShard(dir, partialShardFile(r), [&](const ByteSink& sink) {
      const std::string bytes = payload + "/rank" + std::to_string(r);
      sink(bytes.data(), bytes.size());
    });
    s.rank = r;
    m.shards.push_back(s);
  }
  commitManifest(dir, m);
  return dir;
}

TEST(Sha256, KnownVectors) {
  // FIPS 180-2 test vectors.
  EXPECT_EQ(sha256Hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 streamed;
  streamed.update("a", 1);
  streamed.update("bc", 2);
  EXPECT_EQ(streamed.hexDigest(), sha256Hex("abc", 3));
}

TEST(Sha256, FileDigestMatchesBufferDigestAndSize) {
  TempDir dir;
  std::string big(5 << 20, 'x');  // more than one read chunk
  for (size_t i = 0; i < big.size(); i += 4097) big[i] = static_cast<char>(i);
  writeText(dir.str() + "/f", big);
  uint64_t bytes = 0;
  EXPECT_EQ(sha256File(dir.str() + "/f", &bytes), sha256Hex(big.data(), big.size()));
  EXPECT_EQ(bytes, big.size());
}

TEST(Manifest, RoundTripsThroughJson) {
  Manifest m;
  m.step = 120;
  m.epoch = 3;
  m.kind = Kind::kPartial;
  m.worldSize = 4;
  m.ppSize = 2;
  m.dpSize = 2;
  m.createdUtc = "2026-11-22T03:00:00Z";
  for (int r = 0; r < 4; ++r)
    m.shards.push_back({partialShardFile(r), r, r % 2, uint64_t(1000 + r), std::string(64, 'a' + r)});
  const Manifest back = parseManifest(toJson(m).dump(), "test");
  EXPECT_EQ(toJson(back), toJson(m));
  EXPECT_EQ(back.shards[3].ppRank, 1);
  EXPECT_EQ(back.shards[2].bytes, 1002u);
}

TEST(Manifest, RejectsBadFieldsNamingThem) {
  Manifest m;
  m.step = 5;
  m.shards.push_back({kFullShardFile, 0, 0, 10, std::string(64, 'f')});
  auto bad = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& expected) {
    nlohmann::json j = toJson(m);
    edit(j);
    try {
      parseManifest(j.dump(), "m.json");
      ADD_FAILURE() << "accepted: " << j.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  bad([](auto& j) { j["format"] = "other"; }, "\"format\"");
  bad([](auto& j) { j["version"] = 9; }, "\"version\" 9");
  bad([](auto& j) { j.erase("step"); }, "missing field \"step\"");
  bad([](auto& j) { j["step"] = -1; }, "\"step\" = -1");
  bad([](auto& j) { j["kind"] = "half"; }, "\"kind\" is \"half\"");
  bad([](auto& j) { j["shards"][0]["sha256"] = "xyz"; }, "\"sha256\"");
  bad([](auto& j) { j["shards"][0]["file"] = "../etc/passwd"; }, "plain file name");
  bad([](auto& j) { j["shards"].push_back(j["shards"][0]); }, "listed twice");
  bad([](auto& j) { j["world_size"] = 2; }, "pp_size 1 x dp_size 1 != world_size 2");
  EXPECT_THROW(parseManifest("{not json", "m.json"), Error);
}

TEST(Manifest, DirectoryNamesSortLikeSteps) {
  EXPECT_EQ(checkpointDirName(120), "step-000000000120");
  EXPECT_EQ(parseCheckpointDirName("step-000000000120"), 120);
  EXPECT_FALSE(parseCheckpointDirName("step-12"));
  EXPECT_FALSE(parseCheckpointDirName("step-00000000012x"));
  EXPECT_FALSE(parseCheckpointDirName("other-000000000120"));
  EXPECT_LT(checkpointDirName(99), checkpointDirName(100));
}

TEST(AtomicFile, CommitPublishesAndAbandonLeavesNothing) {
  TempDir dir;
  const std::string path = dir.str() + "/shard.pt";
  {
    AtomicFileWriter w(path, Durability::kDurable);
    w.write("hello", 5);
    EXPECT_FALSE(fs::exists(path));  // only the temporary exists before commit
    EXPECT_TRUE(fs::exists(temporaryPathFor(path)));
    w.commit();
  }
  EXPECT_EQ(readText(path), "hello");
  EXPECT_FALSE(fs::exists(temporaryPathFor(path)));
  {
    AtomicFileWriter w(path, Durability::kAtomicOnly);
    w.write("torn", 4);
    // destroyed without commit: a writer that failed half-way
  }
  EXPECT_EQ(readText(path), "hello");
  EXPECT_FALSE(fs::exists(temporaryPathFor(path)));
  EXPECT_TRUE(isTemporaryName(fs::path(temporaryPathFor(path)).filename().string()));
}

TEST(Finder, TakesTheNewestCompleteCheckpoint) {
  TempDir root;
  writeCheckpoint(root.str(), 10, 2, "a");
  writeCheckpoint(root.str(), 20, 2, "b");
  auto found = findNewestComplete(root.str());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->manifest.step, 20);
  EXPECT_TRUE(found->skipped.empty());
  EXPECT_EQ(readText(found->path + "/rank-00001.pt"), "b/rank1");
}

TEST(Finder, EmptyOrMissingRootFindsNothing) {
  TempDir root;
  EXPECT_FALSE(findNewestComplete(root.str()));
  EXPECT_FALSE(findNewestComplete(root.str() + "/absent"));
}

// What a writer killed at each point of the protocol leaves behind: never taken.
TEST(Finder, NeverTakesAPartialWrite) {
  struct Case {
    const char* name;
    std::function<void(const std::string& dir)> damage;
    const char* why;
  };
  const std::vector<Case> cases = {
      {"killed before the manifest", [](const std::string& d) { fs::remove(d + "/manifest.json"); }, "no manifest"},
      {"killed while writing a shard (only a temp file)",
       [](const std::string& d) {
         fs::remove(d + "/manifest.json");
         fs::rename(d + "/rank-00001.pt", temporaryPathFor(d + "/rank-00001.pt"));
       },
       "no manifest"},
      {"shard missing", [](const std::string& d) { fs::remove(d + "/rank-00001.pt"); }, "rank-00001.pt is missing"},
      {"shard truncated",
       [](const std::string& d) { fs::resize_file(d + "/rank-00000.pt", 3); }, "has 3 bytes, the manifest says"},
      {"shard corrupted, same size",
       [](const std::string& d) {
         std::string t = readText(d + "/rank-00000.pt");
         t[0] ^= 1;
         writeText(d + "/rank-00000.pt", t);
       },
       "fails its checksum"},
      {"manifest torn", [](const std::string& d) { fs::resize_file(d + "/manifest.json", 20); }, "invalid manifest"},
  };
  for (const Case& c : cases) {
    TempDir root;
    writeCheckpoint(root.str(), 10, 2, "old");
    const std::string newest = writeCheckpoint(root.str(), 20, 2, "new");
    c.damage(newest);
    auto found = findNewestComplete(root.str());
    ASSERT_TRUE(found) << c.name;
    EXPECT_EQ(found->manifest.step, 10) << c.name;
    ASSERT_EQ(found->skipped.size(), 1u) << c.name;
    EXPECT_NE(found->skipped[0].find(c.why), std::string::npos) << c.name << ": " << found->skipped[0];
  }
}

TEST(Finder, ResavingAStepDropsItsManifestFirst) {
  TempDir root;
  const std::string dir = writeCheckpoint(root.str(), 10, 1, "x");
  EXPECT_TRUE(fs::exists(dir + "/manifest.json"));
  beginCheckpoint(root.str(), 10);  // a second save of step 10 starts
  EXPECT_FALSE(fs::exists(dir + "/manifest.json"));
  EXPECT_FALSE(findNewestComplete(root.str()));
}

TEST(Prune, PureRuleKeepsTheNewestKWithManifest) {
  const std::vector<Entry> entries = {{30, "", false}, {10, "", true}, {40, "", true}, {20, "", true}, {5, "", false}};
  EXPECT_EQ(stepsToPrune(entries, 2), (std::vector<int64_t>{30, 10, 5}));
  EXPECT_EQ(stepsToPrune(entries, 3), (std::vector<int64_t>{30, 5}));
  EXPECT_EQ(stepsToPrune(entries, 0), (std::vector<int64_t>{}));
  EXPECT_EQ(stepsToPrune({}, 2), (std::vector<int64_t>{}));
}

TEST(Prune, RemovesOldAndTornDirectories) {
  TempDir root;
  for (int64_t step : {10, 20, 30, 40}) writeCheckpoint(root.str(), step, 1, "p");
  fs::remove(root.str() + "/" + checkpointDirName(30) + "/manifest.json");
  const auto removed = pruneCheckpoints(root.str(), 2);
  EXPECT_EQ(removed.size(), 2u);
  std::vector<int64_t> left;
  for (const auto& e : listCheckpoints(root.str())) left.push_back(e.step);
  EXPECT_EQ(left, (std::vector<int64_t>{40, 20}));
}

}  // namespace
}  // namespace strata::checkpoint

#include "checkpoint/restart_policy.h"
#include "strata/exit_codes.h"

namespace strata::checkpoint {
namespace {

TEST(RestartPolicy, SucceedStopRestartGiveUp) {
  EXPECT_EQ(decideAfterExit({false, 0}, 0, 3, false).action, RunAction::kSucceed);
  const RunDecision stopped = decideAfterExit({false, kExitStopped}, 0, 3, false);
  EXPECT_EQ(stopped.action, RunAction::kStopped);
  EXPECT_EQ(stopped.exitCode, kExitStopped);
  const RunDecision killed = decideAfterExit({true, 9}, 1, 3, false);
  EXPECT_EQ(killed.action, RunAction::kRestart);
  EXPECT_NE(killed.why.find("restart 2 of 3"), std::string::npos) << killed.why;
  EXPECT_EQ(decideAfterExit({false, 1}, 2, 3, false).action, RunAction::kRestart);
  const RunDecision last = decideAfterExit({false, 1}, 3, 3, false);
  EXPECT_EQ(last.action, RunAction::kGiveUp);
  EXPECT_EQ(last.exitCode, 1);
  EXPECT_EQ(decideAfterExit({true, 9}, 0, 0, false).exitCode, 137);
  // The launcher itself was told to stop: never restart.
  EXPECT_EQ(decideAfterExit({true, 15}, 0, 3, true).action, RunAction::kStopped);
}

}  // namespace
}  // namespace strata::checkpoint
