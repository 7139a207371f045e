// Where the job secret comes from (runtime/job_secret.h): the precedence of its sources,
// the secret file's checks (ssh-style permissions), and what a job without one does.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
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
    bool severalHosts, encrypt, allow;
    NoSecretAction action;
  };
  const Case cases[] = {
      {LaunchKind::kSingle, false, false, false, NoSecretAction::kNone},
      {LaunchKind::kSingle, true, true, false, NoSecretAction::kNone},
      {LaunchKind::kMpi, false, false, false, NoSecretAction::kExchange},
      {LaunchKind::kMpi, true, false, false, NoSecretAction::kExchange},
      {LaunchKind::kMpi, false, true, false, NoSecretAction::kExchange},  // one host: no TLS anyway
      {LaunchKind::kMpi, true, true, false, NoSecretAction::kRefuse},
      {LaunchKind::kMpi, true, true, true, NoSecretAction::kRefuse},  // no opt-out: give a secret
      {LaunchKind::kEnv, false, false, false, NoSecretAction::kRefuse},  // loopback too
      {LaunchKind::kEnv, false, false, true, NoSecretAction::kWarn},
      {LaunchKind::kEnv, true, true, true, NoSecretAction::kWarn},
  };
  for (const Case& c : cases)
    EXPECT_EQ(decideWithoutSecret({c.kind, c.severalHosts, c.encrypt, c.allow}), c.action)
        << launchKindName(c.kind) << " severalHosts=" << c.severalHosts << " encrypt=" << c.encrypt
        << " allow=" << c.allow;
}

TEST(NoSecretTest, RefusalsNameEveryWayToGiveASecret) {
  const std::string loopback = noSecretRefusal({LaunchKind::kEnv, false, false, false}, "127.0.0.1");
  const std::string network = noSecretRefusal({LaunchKind::kEnv, false, false, false}, "node7");
  const std::string mpi = noSecretRefusal({LaunchKind::kMpi, true, true, false}, "");
  for (const std::string& text : {loopback, network, mpi}) {
    for (const char* way : {"STRATA_JOB_SECRET_FILE", "job_secret_file", "STRATA_JOB_SECRET", "openssl rand -hex 32"})
      EXPECT_NE(text.find(way), std::string::npos) << way << " in: " << text;
  }
  EXPECT_NE(loopback.find("MASTER_ADDR=127.0.0.1 has no job secret, so any user of this host could join"),
            std::string::npos) << loopback;
  EXPECT_NE(network.find("anyone who can reach it"), std::string::npos) << network;
  for (const std::string& text : {loopback, network})
    EXPECT_NE(text.find("\"allow_unauthenticated\": true"), std::string::npos) << text;
  EXPECT_NE(mpi.find("encrypt_inter_node_traffic is on across several hosts"), std::string::npos) << mpi;
  EXPECT_NE(mpi.find("not through `mpirun -x`"), std::string::npos) << mpi;
}

TEST(SecretStrengthTest, EstimatesAndTheWarning) {
  struct Case {
    std::string secret;
    double bits;
  };
  const Case cases[] = {
      {"", 0},
      {"1234", 4 * std::log2(10.0)},
      {std::string(64, 'a'), 256},                                     // lower-case hex
      {std::string(32, 'F'), 128},                                     // `openssl rand -hex 16`, upper case
      {"multihost-test", 14 * std::log2(26.0 + 33)},                   // lower + other
      {"Correct-Horse-7", 15 * std::log2(26.0 + 26 + 10 + 33)},
      {std::string("\x01\xff", 2), 16},                                // any byte
  };
  for (const Case& c : cases) EXPECT_NEAR(secretStrengthBits(c.secret), c.bits, 1e-9) << c.secret;
  const std::string weak = weakSecretWarning("multihost-test", SecretOrigin::kEnvironment);
  EXPECT_NE(weak.find("the job secret (from STRATA_JOB_SECRET) has at most 82 bits of entropy, below 128"),
            std::string::npos) << weak;
  EXPECT_NE(weak.find("openssl rand -hex 32"), std::string::npos) << weak;
  EXPECT_EQ(weakSecretWarning(std::string(32, 'f'), SecretOrigin::kEnvFile), "");
  EXPECT_EQ(weakSecretWarning("x", SecretOrigin::kGenerated), "");  // 256 random bits, hex
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
