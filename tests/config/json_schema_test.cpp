// The pure helpers under the config parser: paths, edit distance and suggestions, value
// descriptions, strict parsing.
#include "config/json_schema.h"

#include <gtest/gtest.h>

#include "core/errors.h"

namespace strata::config::detail {
namespace {

TEST(JsonSchemaTest, ChildPathEscapesPerRfc6901) {
  EXPECT_EQ(childPath("", "a"), "/a");
  EXPECT_EQ(childPath("/a", 3), "/a/3");
  EXPECT_EQ(childPath("/m", "x/y~z"), "/m/x~1y~0z");
  EXPECT_EQ(showPath(""), "(root)");
}

TEST(JsonSchemaTest, EditDistance) {
  EXPECT_EQ(editDistance("", ""), 0u);
  EXPECT_EQ(editDistance("abc", ""), 3u);
  EXPECT_EQ(editDistance("modelparalel", "modelparallel"), 1u);
  EXPECT_EQ(editDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(editDistance("tpc", "tcp"), 1u);                      // a transposition is one edit
  EXPECT_EQ(editDistance("CPUBottleneck", "cpubottleneck"), 0u);  // case-insensitive
}

TEST(JsonSchemaTest, NearestNameSuggestsOnlyLikelyTypos) {
  const std::vector<std::string> keys = {"partitions", "microbatches", "pipeline", "ddp"};
  EXPECT_EQ(nearestName("partitons", keys), "partitions");
  EXPECT_EQ(nearestName("pipline", keys), "pipeline");
  EXPECT_EQ(nearestName("dp", keys), "ddp");
  EXPECT_EQ(nearestName("microbatch", keys), "microbatches");  // containment
  EXPECT_EQ(nearestName("optimizer", keys), "");
  EXPECT_EQ(nearestName("x", keys), "");
  EXPECT_EQ(nearestName("anything", {}), "");
}

TEST(JsonSchemaTest, SuggestionSuffixFallsBackToTheList) {
  EXPECT_EQ(suggestionSuffix("tcpp", {"tcp", "shm"}, "valid"), "; did you mean \"tcp\"?");
  EXPECT_EQ(suggestionSuffix("zzzzzz", {"tcp", "shm"}, "valid"), "; valid: \"tcp\", \"shm\"");
}

TEST(JsonSchemaTest, DescribeAndFormat) {
  EXPECT_EQ(describe(Json("two")), "\"two\"");
  EXPECT_EQ(describe(Json(2.5)), "2.5");
  EXPECT_EQ(describe(Json(std::string(100, 'a'))).size(), 60u);
  EXPECT_EQ(formatNumber(25), "25");
  EXPECT_EQ(formatNumber(0.1), "0.1");
  EXPECT_EQ(formatNumber(65536), "65536");
}

TEST(JsonSchemaTest, ParseStrictReportsPositionAndDuplicates) {
  EXPECT_EQ(parseStrict(R"({"a": [1, {"b": 2}]})", "s")["a"][1]["b"], 2);
  try {
    parseStrict("{\"a\": 1,\n \"b\": tru}", "s.json");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("s.json:2:10 (byte 19): invalid JSON: syntax error while "
                                         "parsing value - invalid literal"),
              std::string::npos)
        << e.what();
  }
  try {
    parseStrict(R"({"a": [{"x": 1}, {"x": 1, "y": {"k": 1, "k": 2}}]})", "s.json");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("s.json: /a/1/y/k: key appears twice"), std::string::npos)
        << e.what();
  }
}

TEST(JsonSchemaTest, ValidatorReadsTypedValues) {
  const Validator v("t");
  EXPECT_EQ(v.expectInt(Json(5), "/x", 1, 10), 5);
  EXPECT_THROW(v.expectInt(Json(11), "/x", 1, 10), ConfigError);
  EXPECT_THROW(v.expectInt(Json(-1), "/x", 0, kNoMax), ConfigError);
  EXPECT_DOUBLE_EQ(v.expectNumber(Json(3), "/x", 0, 5), 3.0);
  EXPECT_THROW(v.expectNumber(Json(0), "/x", 0, 5, /*minExclusive=*/true), ConfigError);
  EXPECT_EQ(v.expectStringList(Json("a, b,c"), "/x"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(v.expectStringList(Json::array({"a"}), "/x"), std::vector<std::string>{"a"});
  EXPECT_THROW(v.expectStringList(Json("a,,b"), "/x"), ConfigError);
  EXPECT_EQ(v.expectRegex(Json("^(?!gradient).*weight"), "/x"), "^(?!gradient).*weight");
  EXPECT_THROW(v.expectRegex(Json("a{2,1}"), "/x"), ConfigError);
}

}  // namespace
}  // namespace strata::config::detail
