// The one atomic file write (src/core/atomic_file.h): a reader sees the old file or the whole
// new one, never a torn one, at every durability; failures are reported, never half-done.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/atomic_file.h"
#include "strata/errors.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/strata_atomic_XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, ec);
    fs::remove_all(path_, ec);
  }
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class AtomicFileTest : public ::testing::TestWithParam<Durability> {};

TEST_P(AtomicFileTest, CommitPublishesAndAbandonLeavesNothing) {
  TempDir dir;
  const std::string path = dir.str() + "/sub/dir/shard.pt";  // parents are created
  {
    AtomicFileWriter w(path, GetParam());
    w.write("hel", 3);
    w.write("lo", 2);
    EXPECT_EQ(w.bytesWritten(), 5u);
    EXPECT_FALSE(fs::exists(path));  // only the temporary exists before commit
    EXPECT_TRUE(fs::exists(temporaryPathFor(path)));
    w.commit();
    EXPECT_THROW(w.commit(), Error);
  }
  EXPECT_EQ(readText(path), "hello");
  EXPECT_FALSE(fs::exists(temporaryPathFor(path)));
  {
    AtomicFileWriter w(path, GetParam());
    w.write("torn", 4);
    // destroyed without commit: a writer that failed half-way
  }
  EXPECT_EQ(readText(path), "hello");
  EXPECT_FALSE(fs::exists(temporaryPathFor(path)));
  EXPECT_TRUE(isTemporaryName(fs::path(temporaryPathFor(path)).filename().string()));
  EXPECT_FALSE(isTemporaryName("shard.pt"));
}

TEST_P(AtomicFileTest, WholeFileReplacesTheOldOne) {
  TempDir dir;
  const std::string path = dir.str() + "/status.json";
  writeFileAtomically(path, "old", GetParam());
  writeFileAtomically(path, "the new content", GetParam());
  EXPECT_EQ(readText(path), "the new content");
  const std::vector<char> bytes = readWholeFile(path);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "the new content");
}

TEST_P(AtomicFileTest, PublishMovesAStreamedFileIntoPlace) {
  TempDir dir;
  const std::string temp = dir.str() + "/trace.json.tmp";
  std::ofstream(temp) << "[\n]\n";
  publishFile(temp, dir.str() + "/framework/trace.json", GetParam());
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_EQ(readText(dir.str() + "/framework/trace.json"), "[\n]\n");
  EXPECT_THROW(publishFile(temp, dir.str() + "/again.json", GetParam()), Error);  // nothing to publish
}

INSTANTIATE_TEST_SUITE_P(Durabilities, AtomicFileTest,
                         ::testing::Values(Durability::kAtomicOnly, Durability::kFileSynced, Durability::kDurable));

TEST(AtomicFile, FailuresNameThePathAndKeepTheOldFile) {
  if (::geteuid() == 0) {
    // Root ignores directory permissions: make the failure with a file where a directory must be.
    TempDir dir;
    std::ofstream(dir.str() + "/blocker") << "x";
    std::string error;
    EXPECT_FALSE(tryWriteFileAtomically(dir.str() + "/blocker/out.json", "{}", Durability::kDurable, &error));
    EXPECT_NE(error.find("blocker"), std::string::npos) << error;
    EXPECT_THROW(writeFileAtomically(dir.str() + "/blocker/out.json", "{}", Durability::kAtomicOnly), Error);
    EXPECT_EQ(readText(dir.str() + "/blocker"), "x");
    return;
  }
  TempDir dir;
  const std::string path = dir.str() + "/out.json";
  writeFileAtomically(path, "kept", Durability::kDurable);
  fs::permissions(dir.str(), fs::perms::owner_read | fs::perms::owner_exec);
  std::string error;
  EXPECT_FALSE(tryWriteFileAtomically(path, "lost", Durability::kDurable, &error));
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_EQ(readText(path), "kept");
}

// Files a job writes are not for every user of the machine: created 0640 under the usual
// umask 022 (which alone would give 0644), whatever way they are written.
TEST(AtomicFile, OutputFilesAreNotReadableByOthers) {
  TempDir dir;
  const mode_t saved = ::umask(022);
  auto modeOf = [](const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 0777;
  };
  writeFileAtomically(dir.str() + "/atomic", "x", Durability::kAtomicOnly);
  EXPECT_EQ(modeOf(dir.str() + "/atomic"), 0640u);
  for (const char* mode : {"w", "wb", "a", "ab"}) {
    const std::string path = dir.str() + "/opened_" + mode;
    std::FILE* f = openOutputFile(path, mode);
    ASSERT_NE(f, nullptr) << mode;
    std::fputs("y", f);
    std::fclose(f);
    EXPECT_EQ(modeOf(path), 0640u) << mode;
  }
  createOutputFile(dir.str() + "/created");
  std::ofstream(dir.str() + "/created") << "z";
  EXPECT_EQ(modeOf(dir.str() + "/created"), 0640u);
  // An existing file keeps its mode (and its content, for "a").
  ::chmod((dir.str() + "/opened_a").c_str(), 0600);
  std::FILE* again = openOutputFile(dir.str() + "/opened_a", "a");
  ASSERT_NE(again, nullptr);
  std::fputs("y", again);
  std::fclose(again);
  EXPECT_EQ(modeOf(dir.str() + "/opened_a"), 0600u);
  EXPECT_EQ(readText(dir.str() + "/opened_a"), "yy");
  EXPECT_EQ(openOutputFile(dir.str() + "/absent/file", "w"), nullptr);
  EXPECT_THROW(openOutputFile(dir.str() + "/x", "r+"), Error);
  ::umask(saved);
}

TEST(AtomicFile, ReadWholeFileNamesAMissingFile) {
  try {
    readWholeFile("/nonexistent/strata/file");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/strata/file"), std::string::npos);
  }
}

}  // namespace
}  // namespace strata
