// Helpers shared by the profiler tests: fixture and golden paths, temporary directories, a
// framework-profile window.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "config/config.h"

namespace strata::profiler::testing {

inline std::filesystem::path testSourceDir() {
  return std::filesystem::path(STRATA_SOURCE_DIR) / "tests" / "profiler";
}
inline std::filesystem::path fixturePath(const std::string& rel) {
  return testSourceDir() / "fixtures" / rel;
}
inline std::filesystem::path goldenPath(const std::string& rel) {
  return testSourceDir() / "golden" / rel;
}

inline std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}
inline void writeFile(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// Compares `actual` with the committed golden file. STRATA_UPDATE_GOLDEN=1 rewrites the
// golden file instead (then review the diff before committing).
inline void expectMatchesGolden(const std::string& actual, const std::string& goldenRel) {
  const auto path = goldenPath(goldenRel);
  if (const char* update = std::getenv("STRATA_UPDATE_GOLDEN"); update && *update == '1') {
    writeFile(path, actual);
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << "missing golden file " << path;
  EXPECT_EQ(actual, readFile(path)) << "output differs from " << path
                                    << " (STRATA_UPDATE_GOLDEN=1 rewrites it)";
}

// A fresh directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("strata_prof_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// A profiler config whose framework profile covers steps [start, start + num).
inline config::ProfilerConfig stepWindow(int64_t start, int64_t num) {
  config::ProfilerConfig c;
  c.frameworkProfile = config::FrameworkProfile{};
  c.frameworkProfile->startStep = start;
  c.frameworkProfile->numSteps = num;
  return c;
}

}  // namespace strata::profiler::testing
