// Where the config comes from: --config FILE, --config=FILE, STRATA_CONFIG, defaults; and
// the errors for files that cannot be read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/errors.h"
#include "testing/config_error.h"

namespace strata::config {
namespace {

class LoadConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/strata_config_test.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    ::unsetenv("STRATA_CONFIG");
  }
  void TearDown() override {
    ::unsetenv("STRATA_CONFIG");
    for (const std::string& f : files_) std::remove(f.c_str());
    ::rmdir(dir_.c_str());
  }

  std::string writeFile(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    files_.push_back(path);
    return path;
  }

  // loadJobConfig with argv built from `args` (argv[0] is added).
  static JobConfig load(std::vector<std::string> args) {
    args.insert(args.begin(), "train");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    return loadJobConfig(static_cast<int>(args.size()), argv.data());
  }

  static std::string loadError(std::vector<std::string> args) {
    return strata::testing::configErrorOf([&] { load(std::move(args)); });
  }

  std::string dir_;
  std::vector<std::string> files_;
};

TEST_F(LoadConfigTest, NothingGivenMeansDefaults) {
  const JobConfig c = load({"--epochs", "3"});
  EXPECT_EQ(c.source, "<defaults>");
  EXPECT_EQ(toJson(c), toJson(defaultJobConfig()));
}

TEST_F(LoadConfigTest, ConfigFlagWithSeparateValue) {
  const std::string path = writeFile("a.json", R"({"output_dir": "from-a"})");
  const JobConfig c = load({"--lr", "0.1", "--config", path});
  EXPECT_EQ(c.outputDir, "from-a");
  EXPECT_EQ(c.source, path);
}

TEST_F(LoadConfigTest, ConfigFlagWithEquals) {
  const std::string path = writeFile("b.json", R"({"output_dir": "from-b"})");
  EXPECT_EQ(load({"--config=" + path}).outputDir, "from-b");
}

TEST_F(LoadConfigTest, LastFlagWins) {
  const std::string a = writeFile("a.json", R"({"output_dir": "from-a"})");
  const std::string b = writeFile("b.json", R"({"output_dir": "from-b"})");
  EXPECT_EQ(load({"--config", a, "--config=" + b}).outputDir, "from-b");
}

TEST_F(LoadConfigTest, EnvironmentWhenNoFlag) {
  const std::string path = writeFile("env.json", R"({"output_dir": "from-env"})");
  ::setenv("STRATA_CONFIG", path.c_str(), 1);
  EXPECT_EQ(load({}).outputDir, "from-env");
}

TEST_F(LoadConfigTest, FlagBeatsEnvironment) {
  const std::string env = writeFile("env.json", R"({"output_dir": "from-env"})");
  const std::string flag = writeFile("flag.json", R"({"output_dir": "from-flag"})");
  ::setenv("STRATA_CONFIG", env.c_str(), 1);
  EXPECT_EQ(load({"--config", flag}).outputDir, "from-flag");
}

TEST_F(LoadConfigTest, EmptyEnvironmentMeansDefaults) {
  ::setenv("STRATA_CONFIG", "", 1);
  EXPECT_EQ(load({}).source, "<defaults>");
}

TEST_F(LoadConfigTest, MissingFileNamesPathOriginAndErrno) {
  const std::string path = dir_ + "/nope.json";
  EXPECT_NE(loadError({"--config", path})
                .find("cannot read config file \"" + path +
                      "\" (from --config): No such file or directory"),
            std::string::npos);
  ::setenv("STRATA_CONFIG", path.c_str(), 1);
  EXPECT_NE(loadError({}).find("(from STRATA_CONFIG): No such file or directory"),
            std::string::npos);
}

TEST_F(LoadConfigTest, DirectoryIsUnreadable) {
  EXPECT_NE(loadError({"--config", dir_})
                .find("cannot read config file \"" + dir_ + "\" (from --config): Is a directory"),
            std::string::npos);
}

TEST_F(LoadConfigTest, FlagWithoutValue) {
  EXPECT_NE(loadError({"--config"}).find("--config needs a file name"), std::string::npos);
  EXPECT_NE(loadError({"--config="}).find("--config was given an empty file name"),
            std::string::npos);
}

TEST_F(LoadConfigTest, InvalidFileContentNamesThePath) {
  const std::string path = writeFile("bad.json", "{\"modelparallel\": {\"pipeline\": \"fast\"}}");
  EXPECT_NE(loadError({"--config", path})
                .find(path + ": /modelparallel/pipeline: \"fast\" is not one of"),
            std::string::npos);
}

}  // namespace
}  // namespace strata::config
