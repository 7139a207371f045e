// The by-path checkpoint index (pure): JSON round trip, validation errors, and the model
// comparison that names the first differing parameter.
#include <gtest/gtest.h>

#include "checkpoint/tensor_index.h"
#include "strata/errors.h"

namespace strata::checkpoint {
namespace {

TensorEntry stored(std::string path, std::vector<int64_t> shape, std::string record, std::string dtype = "float32") {
  TensorEntry e;
  e.path = std::move(path);
  e.shape = std::move(shape);
  e.record = std::move(record);
  e.dtype = std::move(dtype);
  return e;
}

TensorEntry alias(std::string path, std::string of, std::vector<int64_t> shape) {
  TensorEntry e = stored(std::move(path), std::move(shape), "");
  e.aliasOf = std::move(of);
  return e;
}

TensorIndex sampleIndex() {
  TensorIndex index;
  index.tensors = {stored("embed.token.weight", {256, 8}, "t0"), stored("blocks.0.ln1.bias", {8}, "t1"),
                   alias("head.weight", "embed.token.weight", {256, 8})};
  index.tensors[1].buffer = true;
  index.optimizerKind = "AdamW";
  index.optimizer = {{"embed.token.weight", "o0"}, {"blocks.0.ln1.bias", "o1"}};
  index.stateRecord = "state";
  return index;
}

TEST(TensorIndex, JsonRoundTrip) {
  const TensorIndex index = sampleIndex();
  const TensorIndex back = parseTensorIndex(toJson(index).dump(), "idx");
  ASSERT_EQ(back.tensors.size(), 3u);
  EXPECT_EQ(back.tensors[0].path, "embed.token.weight");
  EXPECT_EQ(back.tensors[0].shape, (std::vector<int64_t>{256, 8}));
  EXPECT_EQ(back.tensors[0].record, "t0");
  EXPECT_TRUE(back.tensors[1].buffer);
  EXPECT_FALSE(back.tensors[0].buffer);
  EXPECT_EQ(back.tensors[2].aliasOf, "embed.token.weight");
  EXPECT_EQ(back.tensors[2].record, "");
  EXPECT_EQ(back.optimizerKind, "AdamW");
  ASSERT_EQ(back.optimizer.size(), 2u);
  EXPECT_EQ(back.optimizer[1].path, "blocks.0.ln1.bias");
  EXPECT_EQ(back.optimizer[1].record, "o1");
  EXPECT_EQ(back.stateRecord, "state");
  EXPECT_EQ(toJson(back), toJson(index));
}

TEST(TensorIndex, RejectsBadInput) {
  struct Case {
    std::string json;
    std::string expected;
  };
  const std::string head = R"({"format": "strata-tensor-shard", "version": 1, "tensors": )";
  const Case cases[] = {
      {"[1]", "not a JSON object"},
      {R"({"format": "x", "version": 1, "tensors": []})", "\"format\" is \"x\""},
      {R"({"format": "strata-tensor-shard", "version": 7, "tensors": []})", "version 7 is not supported"},
      {head + R"([{"path": "a", "dtype": "float32", "shape": [2]}]})", "exactly one of \"record\" and \"alias_of\""},
      {head + R"([{"path": "a", "dtype": "float32", "shape": [-1], "record": "t0"}]})", "bad dimension"},
      {head + R"([{"path": "a", "dtype": "float32", "shape": [1], "record": "t0"},
                  {"path": "a", "dtype": "float32", "shape": [1], "record": "t1"}]})",
       "\"a\" is listed twice"},
      {head + R"([{"path": "a", "dtype": "float32", "shape": [1], "record": "t0"},
                  {"path": "b", "dtype": "float32", "shape": [1], "record": "t0"}]})",
       "record \"t0\" is used twice"},
      {head + R"([{"path": "b", "dtype": "float32", "shape": [1], "alias_of": "a"}]})",
       "\"b\" is an alias of \"a\", which the file does not store"},
      {head + R"([{"path": "a", "dtype": "float32", "shape": [1], "record": "t0"},
                  {"path": "b", "dtype": "float32", "shape": [2], "alias_of": "a"}]})",
       "alias \"b\" differs from \"a\""},
      {head + R"([], "optimizer": {"kind": "AdamW", "entries": [{"path": "a"}]}})", "missing field \"record\""},
  };
  for (const Case& c : cases) {
    try {
      parseTensorIndex(c.json, "rank-00001.pt");
      ADD_FAILURE() << "accepted: " << c.json;
    } catch (const strata::Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank-00001.pt"), std::string::npos) << e.what();
    }
  }
}

TEST(TensorIndex, FirstDifferenceNamesTheParameter) {
  const std::vector<TensorEntry> model = {stored("b.weight", {4, 4}, "x"), stored("a.weight", {2, 3}, "y"),
                                          stored("c.bias", {4}, "z")};
  struct Case {
    std::vector<TensorEntry> checkpoint;
    std::string expected;  // "" = equal
  };
  const Case cases[] = {
      {{stored("a.weight", {2, 3}, "0"), stored("b.weight", {4, 4}, "1"), stored("c.bias", {4}, "2")}, ""},
      // Order of the lists does not matter; duplicates of one path (replicas) are one.
      {{stored("c.bias", {4}, "2"), stored("b.weight", {4, 4}, "1"), stored("a.weight", {2, 3}, "0"),
        stored("c.bias", {4}, "3")},
       ""},
      {{stored("a.weight", {2, 3}, "0"), stored("b.weight", {4, 5}, "1"), stored("c.bias", {4}, "2")},
       "\"b.weight\" has shape [4, 5] in the checkpoint, [4, 4] in the model"},
      {{stored("a.weight", {2, 3}, "0"), stored("b.weight", {4, 4}, "1", "float64"), stored("c.bias", {4}, "2")},
       "\"b.weight\" has dtype float64 in the checkpoint, float32 in the model"},
      {{stored("a.weight", {2, 3}, "0"), stored("c.bias", {4}, "2")},
       "the model has \"b.weight\", which the checkpoint does not"},
      {{stored("a.weight", {2, 3}, "0"), stored("b.weight", {4, 4}, "1"), stored("c.bias", {4}, "2"),
        stored("d.weight", {1}, "3")},
       "the checkpoint has \"d.weight\", which the model does not"},
      // The first difference in path order is named, not the first in the list.
      {{stored("c.bias", {5}, "2"), stored("a.weight", {3, 3}, "0"), stored("b.weight", {4, 4}, "1")},
       "\"a.weight\" has shape [3, 3] in the checkpoint, [2, 3] in the model"},
      {{}, "the model has \"a.weight\", which the checkpoint does not"},
  };
  for (const Case& c : cases) {
    const std::optional<std::string> diff = firstDifference(c.checkpoint, model);
    if (c.expected.empty()) {
      EXPECT_FALSE(diff.has_value()) << *diff;
    } else {
      ASSERT_TRUE(diff.has_value()) << c.expected;
      EXPECT_EQ(*diff, c.expected);
    }
  }
}

}  // namespace
}  // namespace strata::checkpoint
