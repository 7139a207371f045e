// Where the job secret comes from (runtime/job_secret.h): the precedence of its sources,
// the secret file's checks (ssh-style permissions), and what a job without one does.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/errors.h"
#include "runtime/job_secret.h"
#include "testing/config_error.h"

namespace strata::runtime {
namespace {

namespace fs = std::filesystem;

class SecretFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("strata_secret_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& content, mode_t mode) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << content;
    ::chmod(path.c_str(), mode);
    return path;
  }
  static std::string errorOf(const std::string& path) {
    return strata::testing::configErrorOf([&] { readSecretFile(path, "STRATA_JOB_SECRET_FILE"); });
  }
  fs::path dir_;
};

TEST(SecretSourceTest, EnvironmentBeforeEnvFileBeforeConfigFile) {
  struct Case {
    std::string env, envFile;
    std::optional<std::string> configFile;
    SecretOrigin origin;
    std::string value;
  };
  const Case cases[] = {
      {"", "", std::nullopt, SecretOrigin::kNone, ""},
      {"", "", std::string(""), SecretOrigin::kNone, ""},
      {"s3cret", "/e", std::string("/c"), SecretOrigin::kEnvironment, "s3cret"},
      {"", "/e", std::string("/c"), SecretOrigin::kEnvFile, "/e"},
      {"", "", std::string("/c"), SecretOrigin::kConfigFile, "/c"},
  };
  for (const Case& c : cases) {
    const SecretSource s = chooseSecretSource(c.env, c.envFile, c.configFile);
    EXPECT_EQ(s.origin, c.origin) << c.env << "|" << c.envFile;
    EXPECT_EQ(s.value, c.value);
  }
}

TEST_F(SecretFile, PrivateFileGivesItsContentWithoutTheTrailingNewline) {
  EXPECT_EQ(readSecretFile(write("ok", "  tok en \n", 0600), "x"), "  tok en");
  EXPECT_EQ(readSecretFile(write("ro", "abc", 0400), "x"), "abc");
}

TEST_F(SecretFile, FileOthersCanReadIsRefusedWithTheFix) {
  for (const mode_t mode : {0644, 0640, 0604, 0620, 0602}) {
    const std::string path = write("open" + std::to_string(mode), "abc", mode);
    const std::string error = errorOf(path);
    EXPECT_NE(error.find("accessible by group or others"), std::string::npos) << error;
    EXPECT_NE(error.find("chmod 600 " + path), std::string::npos) << error;
    EXPECT_NE(error.find("STRATA_JOB_SECRET_FILE"), std::string::npos) << error;
  }
}

TEST_F(SecretFile, MissingEmptyOrNotAFileIsRefused) {
  EXPECT_NE(errorOf((dir_ / "absent").string()).find("cannot be read"), std::string::npos);
  EXPECT_NE(errorOf(write("empty", "\n \n", 0600)).find("is empty"), std::string::npos);
  fs::create_directories(dir_ / "d");
  ::chmod((dir_ / "d").c_str(), 0700);
  EXPECT_NE(errorOf((dir_ / "d").string()).find("not a regular file"), std::string::npos);
  EXPECT_NE(errorOf(write("big", std::string(5000, 'x'), 0600)).find("short token"), std::string::npos);
}

TEST_F(SecretFile, LoadJobSecretFollowsTheEnvironment) {
  const std::string path = write("job", "from-file\n", 0600);
  ::unsetenv("STRATA_JOB_SECRET");
  ::unsetenv("STRATA_JOB_SECRET_FILE");
  EXPECT_EQ(loadJobSecret(std::nullopt).origin, SecretOrigin::kNone);
  JobSecret s = loadJobSecret(path);
  EXPECT_EQ(s.origin, SecretOrigin::kConfigFile);
  EXPECT_EQ(s.secret, "from-file");
  ::setenv("STRATA_JOB_SECRET_FILE", path.c_str(), 1);
  EXPECT_EQ(loadJobSecret(std::nullopt).origin, SecretOrigin::kEnvFile);
  ::setenv("STRATA_JOB_SECRET", "from-env", 1);
  s = loadJobSecret(path);
  EXPECT_EQ(s.origin, SecretOrigin::kEnvironment);
  EXPECT_EQ(s.secret, "from-env");
  ::unsetenv("STRATA_JOB_SECRET");
  ::unsetenv("STRATA_JOB_SECRET_FILE");
}

TEST(NoSecretTest, DecisionTable) {
  struct Case {
    LaunchKind kind;
    bool loopback, allow;
    NoSecretAction action;
  };
  const Case cases[] = {
      {LaunchKind::kSingle, false, false, NoSecretAction::kNone},
      {LaunchKind::kMpi, false, false, NoSecretAction::kGenerate},
      {LaunchKind::kMpi, true, true, NoSecretAction::kGenerate},
      {LaunchKind::kEnv, true, false, NoSecretAction::kWarn},
      {LaunchKind::kEnv, false, false, NoSecretAction::kRefuse},
      {LaunchKind::kEnv, false, true, NoSecretAction::kWarn},
  };
  for (const Case& c : cases)
    EXPECT_EQ(decideWithoutSecret(c.kind, c.loopback, c.allow), c.action)
        << launchKindName(c.kind) << " loopback=" << c.loopback << " allow=" << c.allow;
}

TEST(NoSecretTest, LoopbackHosts) {
  for (const char* h : {"localhost", "127.0.0.1", "127.0.1.1", "::1"}) EXPECT_TRUE(isLoopbackHost(h)) << h;
  for (const char* h : {"10.0.0.1", "node7", "", "1127.0.0.1", "0.0.0.0"}) EXPECT_FALSE(isLoopbackHost(h)) << h;
}

TEST(NoSecretTest, MpiRanksMustAgreeOnHavingASecret) {
  EXPECT_EQ(secretPresenceMismatch({true, true, true}), "");
  EXPECT_EQ(secretPresenceMismatch({false, false}), "");
  const std::string error = secretPresenceMismatch({true, false, true, false});
  EXPECT_NE(error.find("rank(s) 0,2 have a job secret but rank(s) 1,3 have none"), std::string::npos) << error;
}

}  // namespace
}  // namespace strata::runtime
