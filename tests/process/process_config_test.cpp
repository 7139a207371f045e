// Process tests of bad input: a broken job config and a wrong or missing job secret end every
// rank with an error that names the cause, under torchrun-style launches and mpiexec.
#include "process_harness.h"

namespace {

using namespace process_testing;

// ---------------------------------------------------------------------------------------
// 3. A broken job config: every rank reports it, with its rank tag, and exits non-zero;
// nobody waits for anybody.

struct ConfigCase {
  const char* name;
  const char* json;      // nullptr: the file does not exist
  bool viaEnvironment;   // STRATA_CONFIG instead of --config
  const char* expected;  // the message after "[rK/2] "; {path} is the config file's path
};

std::string expand(std::string text, const std::string& path) {
  const std::string key = "{path}";
  for (size_t at; (at = text.find(key)) != std::string::npos;) text.replace(at, key.size(), path);
  return text;
}

void PrintTo(const ConfigCase& c, std::ostream* os) { *os << c.name; }

class BadJobConfig : public ::testing::TestWithParam<ConfigCase> {};

TEST_P(BadJobConfig, EveryRankReportsItAndExits) {
  const ConfigCase& c = GetParam();
  const std::string dir = testDir();
  Job job(dir);
  const std::string path = dir + "/job.json";
  if (c.json) writeFile(path, c.json);
  std::vector<std::string> args = {"--mode", "init"};
  std::vector<std::string> env = {"STRATA_TIMEOUT_MS=" + std::to_string(kLongTimeoutMs)};
  if (c.viaEnvironment) {
    env.push_back("STRATA_CONFIG=" + path);
  } else {
    args.insert(args.end(), {"--config", path});
  }
  launchRanks(job, 2, args, env);
  ASSERT_TRUE(job.waitAll(milliseconds(10000))) << "hang on a config error\n" << job.report();
  const std::string message = expand(c.expected, path);
  for (int r = 0; r < 2; ++r) {
    const Proc& p = job[static_cast<size_t>(r)];
    const std::string out = p.output();
    const std::string tag = "[r" + std::to_string(r) + "/2]";
    EXPECT_TRUE(p.exitedWith(2)) << p.name << " " << p.how() << "\n" << out;
    EXPECT_NE(out.find("error: " + tag + " " + message), std::string::npos)
        << p.name << " should print \"error: " << tag << " " << message << "\", printed:\n"
        << out;
    EXPECT_NE(out.find("error-type: ConfigError"), std::string::npos) << out;
    EXPECT_EQ(out.find("ready rank="), std::string::npos) << "init succeeded on a bad config:\n" << out;
    // Neither rank waited for the other (no rendezvous before the config is checked).
    EXPECT_LT(msBetween(job.start(), p.end), 5000) << p.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadJobConfig,
    ::testing::Values(
        ConfigCase{"UnknownKey", R"({"modelparalel": {}})", false,
                   R"({path}: unknown key "modelparalel" at /modelparalel; did you mean "modelparallel"?)"},
        ConfigCase{"WrongType", R"({"modelparallel": {"partitions": "two"}})", false,
                   R"({path}: /modelparallel/partitions: expected an integer >= 1, got "two")"},
        ConfigCase{"OutOfRange", R"({"dataparallel": {"bucket_cap_mb": -1}})", false,
                   R"({path}: /dataparallel/bucket_cap_mb: expected a number in (0, 65536], got -1)"},
        ConfigCase{"BadJson", R"({"output_dir": })", false, R"({path}:1:16 (byte 16): invalid JSON: syntax error)"},
        ConfigCase{"PartitionsDoNotDivideWorld", R"({"modelparallel": {"enabled": true, "partitions": 3}})", false,
                   R"({path}: /modelparallel/partitions: 3 does not divide the world size 2)"},
        ConfigCase{"MissingFileFromEnvironment", nullptr, true,
                   R"(cannot read config file "{path}" (from STRATA_CONFIG): No such file or directory)"},
        ConfigCase{"MissingFileFromFlag", nullptr, false,
                   R"(cannot read config file "{path}" (from --config): No such file or directory)"}),
    [](const ::testing::TestParamInfo<ConfigCase>& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------
// 4. The same under a real mpiexec.

std::vector<std::string> mpiexecArgs(int ranks, const std::vector<std::string>& workerArgs) {
  std::vector<std::string> argv = {kMpiexec, "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(ranks),
                                   kWorker};
  argv.insert(argv.end(), workerArgs.begin(), workerArgs.end());
  return argv;
}

std::vector<std::string> mpiexecEnv() {
  return with(cleanEnvironment(), {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                                   "OMPI_MCA_rmaps_base_oversubscribe=1",
                                   "STRATA_TIMEOUT_MS=" + std::to_string(kLongTimeoutMs)});
}

TEST(Mpiexec, HealthyJobCompletes) {
  if (std::string(kMpiexec).empty()) GTEST_SKIP() << "built without MPI";
  Job job(testDir());
  job.spawn("mpiexec", mpiexecArgs(2, {"--mode", "loop", "--iters", "50"}), mpiexecEnv(), /*ownGroup=*/true);
  ASSERT_TRUE(job.waitAll(milliseconds(30000))) << "hang\n" << job.report();
  EXPECT_TRUE(job[0].exitedWith(0)) << job.report();
  const std::string out = job[0].output();
  EXPECT_NE(out.find("ready rank=0 size=2"), std::string::npos) << out;
  EXPECT_NE(out.find("ready rank=1 size=2"), std::string::npos) << out;
}

TEST(Mpiexec, BadConfigFailsOnBothRanks) {
  if (std::string(kMpiexec).empty()) GTEST_SKIP() << "built without MPI";
  const std::string dir = testDir();
  Job job(dir);
  const std::string path = dir + "/bad.json";
  writeFile(path, R"({"modelparalel": {}})");
  job.spawn("mpiexec", mpiexecArgs(2, {"--mode", "init", "--config", path}), mpiexecEnv(), /*ownGroup=*/true);
  ASSERT_TRUE(job.waitAll(milliseconds(30000))) << "hang\n" << job.report();
  EXPECT_TRUE(job[0].exitedNonZero()) << job[0].how() << "\n" << job.report();
  const std::string out = job[0].output();
  const std::string message = path + R"(: unknown key "modelparalel" at /modelparalel; did you mean "modelparallel"?)";
  for (int r = 0; r < 2; ++r) {
    const std::string line = "error: [r" + std::to_string(r) + "/2] " + message;
    EXPECT_NE(out.find(line), std::string::npos) << "missing \"" << line << "\" in:\n" << out;
  }
  EXPECT_EQ(out.find("ready rank="), std::string::npos) << out;
}

// ---------------------------------------------------------------------------------------
// 5. The job secret (docs/security.md): a rank with another secret is refused by the store
// and the job ends on every rank, naming why; a network store without a secret is refused.

TEST(JobSecret, WrongSecretIsRefusedAndEveryRankEnds) {
  Job job(testDir());
  const int port = freePort();
  ASSERT_GT(port, 0);
  for (int r = 0; r < 2; ++r) {
    job.spawn("rank" + std::to_string(r), {kWorker, "--mode", "init"},
              rankEnv(r, 2, port, {"STRATA_TIMEOUT_MS=4000", r == 0 ? "STRATA_JOB_SECRET=alpha" : "STRATA_JOB_SECRET=beta"}));
  }
  ASSERT_TRUE(job.waitAll(milliseconds(30000))) << "hang on a wrong secret\n" << job.report();
  // Rank 1 is refused at once: a config error naming the store and the secret settings.
  const std::string refused = job[1].output();
  EXPECT_TRUE(job[1].exitedWith(2)) << job.report();
  EXPECT_NE(refused.find("error-type: ConfigError"), std::string::npos) << refused;
  EXPECT_NE(refused.find("127.0.0.1:" + std::to_string(port) + ": the server refused our proof of the job secret"),
            std::string::npos)
      << refused;
  EXPECT_LT(msBetween(job.start(), job[1].end), 3500) << "the refusal waited for a timeout";
  // Rank 0 (the store) gives up at its timeout, quoting the refusal of rank 1.
  const std::string waited = job[0].output();
  EXPECT_TRUE(job[0].exitedNonZero()) << job.report();
  EXPECT_NE(waited.find("rank 1 did not join the job"), std::string::npos) << waited;
  EXPECT_NE(waited.find("the store refused: 127.0.0.1:"), std::string::npos) << waited;
  EXPECT_NE(waited.find("claiming rank 1: wrong job secret"), std::string::npos) << waited;
}

TEST(JobSecret, NetworkStoreWithoutASecretIsRefusedBeforeAnyConnection) {
  Job job(testDir());
  // A name that never resolves (RFC 2606): the check comes before any lookup or connection.
  for (int r = 0; r < 2; ++r) {
    job.spawn("rank" + std::to_string(r), {kWorker, "--mode", "init"},
              with(cleanEnvironment(), {"RANK=" + std::to_string(r), "WORLD_SIZE=2", "MASTER_ADDR=store.strata.invalid",
                                        "MASTER_PORT=29500"}));
  }
  ASSERT_TRUE(job.waitAll(milliseconds(20000))) << "hang\n" << job.report();
  for (int r = 0; r < 2; ++r) {
    const std::string out = job[static_cast<size_t>(r)].output();
    EXPECT_TRUE(job[static_cast<size_t>(r)].exitedWith(2)) << job.report();
    EXPECT_NE(out.find("error-type: ConfigError"), std::string::npos) << out;
    EXPECT_NE(out.find("MASTER_ADDR=store.strata.invalid has no job secret, so anyone who can reach it could join"),
              std::string::npos) << out;
    EXPECT_NE(out.find("STRATA_JOB_SECRET"), std::string::npos) << out;
  }
}

// Item 2 of issue 37: any user of the host could join a loopback store without a secret, so
// it is refused the same way, naming the ways to give one; "allow_unauthenticated" opts out.
TEST(JobSecret, LoopbackStoreWithoutASecretIsRefusedUnlessAllowed) {
  const std::string dir = testDir();
  Job job(dir);
  writeFile(dir + "/allow.json", R"({"security": {"allow_unauthenticated": true}})");
  const int refusedPort = freePort(), allowedPort = freePort();
  ASSERT_GT(refusedPort, 0);
  ASSERT_GT(allowedPort, 0);
  auto noSecret = [](int r, int port, std::vector<std::string> extra) {
    return with(cleanEnvironment(), with({"RANK=" + std::to_string(r), "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1",
                                          "MASTER_PORT=" + std::to_string(port), "STRATA_TIMEOUT_MS=20000"},
                                         extra));
  };
  for (int r = 0; r < 2; ++r) job.spawn("refused" + std::to_string(r), {kWorker, "--mode", "init"}, noSecret(r, refusedPort, {}));
  for (int r = 0; r < 2; ++r)
    job.spawn("allowed" + std::to_string(r), {kWorker, "--mode", "init"},
              noSecret(r, allowedPort, {"STRATA_CONFIG=" + dir + "/allow.json"}));
  ASSERT_TRUE(job.waitAll(milliseconds(60000))) << "hang\n" << job.report();
  for (size_t r = 0; r < 2; ++r) {
    const std::string out = job[r].output();
    EXPECT_TRUE(job[r].exitedWith(2)) << job.report();
    EXPECT_NE(out.find("error-type: ConfigError"), std::string::npos) << out;
    EXPECT_NE(out.find("MASTER_ADDR=127.0.0.1 has no job secret, so any user of this host could join"),
              std::string::npos) << out;
    for (const char* way : {"STRATA_JOB_SECRET_FILE", "STRATA_JOB_SECRET in every rank's environment",
                            "\"allow_unauthenticated\": true"})
      EXPECT_NE(out.find(way), std::string::npos) << way << " in:\n" << out;
    EXPECT_EQ(out.find("ready rank="), std::string::npos) << out;
  }
  for (size_t r = 2; r < 4; ++r) EXPECT_TRUE(job[r].exitedWith(0)) << job.report();
  EXPECT_NE(job[2].output().find("no job secret: the rendezvous store"), std::string::npos) << job[2].output();
}

TEST(JobSecret, MpiexecWithAWrongSecretOnOneRankEndsTheJob) {
  if (std::string(kMpiexec).empty()) GTEST_SKIP() << "built without MPI";
  Job job(testDir());
  std::vector<std::string> argv = {kMpiexec, "--allow-run-as-root", "--oversubscribe", "-np", "1", "-x",
                                   "STRATA_JOB_SECRET=alpha", kWorker, "--mode", "init", ":", "-np", "1", "-x",
                                   "STRATA_JOB_SECRET=beta", kWorker, "--mode", "init"};
  job.spawn("mpiexec", argv, mpiexecEnv(), /*ownGroup=*/true);
  ASSERT_TRUE(job.waitAll(milliseconds(30000))) << "hang\n" << job.report();
  EXPECT_TRUE(job[0].exitedNonZero()) << job.report();
  const std::string out = job[0].output();
  EXPECT_NE(out.find("error: [r1/2] TcpStore 127.0.0.1:"), std::string::npos) << out;
  EXPECT_NE(out.find("the server refused our proof of the job secret: wrong job secret"), std::string::npos) << out;
  EXPECT_EQ(out.find("ready rank="), std::string::npos) << out;
  EXPECT_LT(msBetween(job.start(), job[0].end), static_cast<double>(kLongTimeoutMs)) << "ended only at a timeout";
}

}  // namespace
