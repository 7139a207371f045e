// The "security" section: defaults, values, strict errors with suggestions, and the toJson
// round trip (the secret itself is never a config value, only the path of its file).
#include <gtest/gtest.h>

#include "config/config.h"
#include "core/errors.h"
#include "expect_config_error.h"

namespace strata::config {
namespace {

TEST(SecurityKeysTest, Defaults) {
  const JobConfig c = parseJobConfig("{}", "empty.json");
  EXPECT_FALSE(c.security.encryptInterNodeTraffic);
  EXPECT_FALSE(c.security.jobSecretFile.has_value());
  EXPECT_FALSE(c.security.allowUnauthenticated);
}

TEST(SecurityKeysTest, ValuesAreReadAndRoundTrip) {
  const JobConfig c = parseJobConfig(R"({"security": {"encrypt_inter_node_traffic": true,
                                         "job_secret_file": "/etc/strata/secret", "allow_unauthenticated": true}})",
                                     "job.json");
  EXPECT_TRUE(c.security.encryptInterNodeTraffic);
  EXPECT_EQ(c.security.jobSecretFile.value_or(""), "/etc/strata/secret");
  EXPECT_TRUE(c.security.allowUnauthenticated);
  const nlohmann::json j = toJson(c);
  EXPECT_EQ(j["security"]["job_secret_file"], "/etc/strata/secret");
  const JobConfig again = parseJobConfig(j.dump(), "again.json");
  EXPECT_TRUE(again.security.encryptInterNodeTraffic);
  EXPECT_EQ(again.security.jobSecretFile.value_or(""), "/etc/strata/secret");
  EXPECT_TRUE(again.security.allowUnauthenticated);
  EXPECT_FALSE(toJson(parseJobConfig("{}", "d")).at("security").contains("job_secret_file"));
}

TEST(SecurityKeysTest, Errors) {
  expectConfigError(R"({"security": {"encrypt_inter_node_traffic": "yes"}})", "/security/encrypt_inter_node_traffic");
  // SageMaker's name is too far for a suggestion: the valid keys are listed instead.
  expectConfigError(R"({"security": {"encrypt_inter_container_traffic": true}})",
              "valid keys here: \"encrypt_inter_node_traffic\"");
  expectConfigError(R"({"security": {"job_secret": "hunter2"}})", "did you mean \"job_secret_file\"");
  expectConfigError(R"({"security": {"job_secret_file": ""}})", "/security/job_secret_file");
  expectConfigError(R"({"security": {"job_secret_file": 7}})", "/security/job_secret_file");
  expectConfigError(R"({"security": true})", "/security");
  expectConfigError(R"({"securty": {}})", "did you mean \"security\"");
}

}  // namespace
}  // namespace strata::config
