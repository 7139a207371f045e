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

// Shards of one checkpoint as a 2-stage pipeline writes them: the embedding on rank 0, the
// head's copy of the tied weight on rank 1, each with its own optimizer entries.
std::vector<TensorIndex> twoStageShards() {
  TensorIndex rank0, rank1;
  rank0.tensors = {stored("embed.token.weight", {256, 8}, "t0"), stored("blocks.0.w", {8, 8}, "t1")};
  rank0.optimizerKind = "AdamW";
  rank0.optimizer = {{"embed.token.weight", "o0"}, {"blocks.0.w", "o1"}};
  rank1.tensors = {stored("blocks.1.w", {8, 8}, "t0"), stored("head.weight", {256, 8}, "t1")};
  rank1.optimizerKind = "AdamW";
  rank1.optimizer = {{"blocks.1.w", "o0"}, {"head.weight", "o1"}};
  return {rank0, rank1};
}

TEST(ShardCatalog, FindsEveryPathInTheShardThatHoldsIt) {
  const ShardCatalog catalog(twoStageShards(), {"rank-00000.pt", "rank-00001.pt"}, 1);
  ASSERT_TRUE(catalog.tensor("blocks.0.w").has_value());
  EXPECT_EQ(catalog.tensor("blocks.0.w")->shard, 0u);
  EXPECT_EQ(catalog.tensor("head.weight")->shard, 1u);
  EXPECT_EQ(catalog.tensor("head.weight")->storedPath, "head.weight");
  EXPECT_FALSE(catalog.tensor("blocks.2.w").has_value());
  ASSERT_TRUE(catalog.optimizerState("blocks.1.w").has_value());
  EXPECT_EQ(catalog.optimizerState("blocks.1.w")->shard, 1u);
  EXPECT_EQ(catalog.optimizerState("blocks.1.w")->record, "o0");
  EXPECT_EQ(catalog.optimizerState("embed.token.weight")->record, "o0");
  EXPECT_EQ(catalog.optimizerState("embed.token.weight")->shard, 0u);
  EXPECT_FALSE(catalog.optimizerState("nothing").has_value());
  EXPECT_EQ(catalog.optimizerKind(), "AdamW");
  std::vector<std::string> paths;
  for (const TensorEntry& e : catalog.entries()) paths.push_back(e.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"blocks.0.w", "blocks.1.w", "embed.token.weight", "head.weight"}));
}

TEST(ShardCatalog, AnAliasReadsItsTargetsBytesAndOptimizerState) {
  // One process holds the tied weight once: the head's path is an alias in its only shard.
  TensorIndex one;
  one.tensors = {stored("embed.token.weight", {256, 8}, "t0"), alias("head.weight", "embed.token.weight", {256, 8})};
  one.optimizerKind = "SGD";
  one.optimizer = {{"embed.token.weight", "o0"}};
  const ShardCatalog catalog({one}, {"rank-00000.pt"}, 0);
  EXPECT_EQ(catalog.tensor("head.weight")->storedPath, "embed.token.weight");
  ASSERT_TRUE(catalog.optimizerState("head.weight").has_value());
  EXPECT_EQ(catalog.optimizerState("head.weight")->record, "o0");
}

TEST(ShardCatalog, ThePreferredShardWinsAmongReplicas) {
  TensorIndex replica;
  replica.tensors = {stored("w", {2}, "t0")};
  replica.optimizerKind = "Adam";
  replica.optimizer = {{"w", "o0"}};
  TensorIndex withoutState;
  withoutState.tensors = {stored("w", {2}, "t0")};
  for (size_t preferred : {0u, 1u, 2u}) {
    const ShardCatalog catalog({replica, replica, replica}, {"a", "b", "c"}, preferred);
    EXPECT_EQ(catalog.tensor("w")->shard, preferred);
    EXPECT_EQ(catalog.optimizerState("w")->shard, preferred);
  }
  // The preferred shard has no optimizer entry for the path: the next one that has is used.
  const ShardCatalog catalog({replica, withoutState}, {"a", "b"}, 1);
  EXPECT_EQ(catalog.tensor("w")->shard, 1u);
  EXPECT_EQ(catalog.optimizerState("w")->shard, 0u);
}

TEST(ShardCatalog, RefusesShardsThatDisagree) {
  std::vector<TensorIndex> shards = twoStageShards();
  shards[1].tensors.push_back(stored("blocks.0.w", {8, 9}, "t2"));
  try {
    ShardCatalog(shards, {"rank-00000.pt", "rank-00001.pt"}, 0);
    ADD_FAILURE() << "shards with two shapes of one path accepted";
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank-00000.pt and rank-00001.pt disagree on \"blocks.0.w\": float32 [8, 8] "
                                         "against float32 [8, 9]"),
              std::string::npos)
        << e.what();
  }
  shards = twoStageShards();
  shards[1].optimizerKind = "SGD";
  try {
    ShardCatalog(shards, {"rank-00000.pt", "rank-00001.pt"}, 0);
    ADD_FAILURE() << "shards of two optimizers accepted";
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("different optimizers (AdamW and SGD)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata::checkpoint
