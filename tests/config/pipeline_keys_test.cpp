// The Strata-only pipeline keys of "modelparallel": virtual_stages,
// activation_checkpointing and the zero_bubble schedule (defaults, values, errors, toJson
// round trip).
#include <gtest/gtest.h>

#include "config/config.h"
#include "core/errors.h"
#include "expect_config_error.h"

namespace strata::config {
namespace {

TEST(PipelineKeysTest, Defaults) {
  const JobConfig c = parseJobConfig("{}", "empty.json");
  EXPECT_EQ(c.modelParallel.virtualStages, 1);
  EXPECT_FALSE(c.modelParallel.activationCheckpointing);
}

TEST(PipelineKeysTest, ValuesAreReadAndRoundTrip) {
  const JobConfig c = parseJobConfig(
      R"({"modelparallel": {"enabled": true, "partitions": 2, "virtual_stages": 3,
                            "activation_checkpointing": true}})",
      "job.json");
  EXPECT_EQ(c.modelParallel.virtualStages, 3);
  EXPECT_TRUE(c.modelParallel.activationCheckpointing);
  const JobConfig again = parseJobConfig(toJson(c).dump(), "again.json");
  EXPECT_EQ(again.modelParallel.virtualStages, 3);
  EXPECT_TRUE(again.modelParallel.activationCheckpointing);
}

TEST(PipelineKeysTest, Errors) {
  expectConfigError(R"({"modelparallel": {"enabled": true, "virtual_stages": 0}})", "/modelparallel/virtual_stages");
  expectConfigError(R"({"modelparallel": {"enabled": true, "virtual_stages": "2"}})", "/modelparallel/virtual_stages");
  expectConfigError(R"({"modelparallel": {"enabled": true, "activation_checkpointing": 1}})",
              "/modelparallel/activation_checkpointing");
  expectConfigError(R"({"modelparallel": {"enabled": true, "partitions": 2, "virtual_stages": 2,
                  "auto_partition": false, "manual_partition": {"0": 0, "1": 1}}})",
              "/modelparallel/manual_partition");
}

TEST(PipelineKeysTest, ZeroBubbleScheduleIsReadAndRoundTrips) {
  const JobConfig c =
      parseJobConfig(R"({"modelparallel": {"enabled": true, "partitions": 2, "pipeline": "zero_bubble"}})", "job.json");
  EXPECT_EQ(c.modelParallel.pipeline, "zero_bubble");
  EXPECT_EQ(parseJobConfig(toJson(c).dump(), "again.json").modelParallel.pipeline, "zero_bubble");
}

TEST(PipelineKeysTest, ZeroBubbleErrorsNameTheFieldAndTheValidNames) {
  expectConfigError(R"({"modelparallel": {"enabled": true, "pipeline": "zero-bubble"}})", "zero_bubble");
  expectConfigError(R"({"modelparallel": {"enabled": true, "pipeline": "zero-bubble"}})", "/modelparallel/pipeline");
  expectConfigError(R"({"modelparallel": {"enabled": true, "partitions": 2, "pipeline": "zero_bubble",
                  "virtual_stages": 2}})",
                    "/modelparallel/virtual_stages");
  expectConfigError(R"({"modelparallel": {"enabled": true, "partitions": 2, "pipeline": "zero_bubble",
                  "activation_checkpointing": true}})",
                    "/modelparallel/activation_checkpointing");
}

}  // namespace
}  // namespace strata::config
