// The partitioner against brute force (every contiguous partition enumerated), plus the
// degenerate inputs that broke other partitioners.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/errors.h"
#include "pipeline/partitioner.h"

namespace strata::pipeline {
namespace {

std::vector<LayerCost> layersFromTimes(const std::vector<double>& times) {
  std::vector<LayerCost> layers;
  for (size_t i = 0; i < times.size(); ++i) {
    LayerCost l;
    l.name = "l" + std::to_string(i);
    l.forwardSeconds = times[i];
    layers.push_back(l);
  }
  return layers;
}

// Every bounds vector 0 = b0 < b1 < ... < bS = n.
void forEachBounds(int n, int stages, const std::function<void(const std::vector<int>&)>& fn) {
  std::vector<int> bounds{0};
  std::function<void(int)> rec = [&](int k) {
    if (k == stages) {
      bounds.push_back(n);
      fn(bounds);
      bounds.pop_back();
      return;
    }
    for (int b = bounds.back() + 1; b <= n - (stages - k); ++b) {
      bounds.push_back(b);
      rec(k + 1);
      bounds.pop_back();
    }
  };
  rec(1);
}

bool respectsTies(const std::vector<LayerCost>& layers, const std::vector<int>& stageOf, bool together = true) {
  if (!together) return true;
  for (size_t i = 0; i < layers.size(); ++i)
    for (size_t j = 0; j < layers.size(); ++j)
      if (layers[i].tieGroup >= 0 && layers[i].tieGroup == layers[j].tieGroup && stageOf[i] != stageOf[j]) return false;
  return true;
}

struct Brute {
  bool feasible = false;
  double primary = std::numeric_limits<double>::infinity();
  double secondary = std::numeric_limits<double>::infinity();
};

double timeOf(const Partition& p) { return p.bottleneckSeconds; }
double memoryOf(const Partition& p) { return static_cast<double>(p.peakMemoryBytes); }
double costOf(const Partition& p) { return p.bottleneckCost; }

// The objective the options ask for, and its tie-break.
double primaryOf(const Partition& p, const PartitionOptions& o) {
  if (o.memoryWeight) return costOf(p);
  return o.objective == Objective::kSpeed ? timeOf(p) : memoryOf(p);
}
double secondaryOf(const Partition& p, const PartitionOptions& o) {
  return o.objective == Objective::kSpeed && !o.memoryWeight ? memoryOf(p) : timeOf(p);
}

Brute bruteForce(const std::vector<LayerCost>& layers, int stages, const PartitionOptions& options) {
  Brute best;
  std::vector<Partition> all;
  forEachBounds(static_cast<int>(layers.size()), stages, [&](const std::vector<int>& bounds) {
    Partition p = evaluateBounds(layers, bounds, options);
    if (!respectsTies(layers, p.stageOfLayer, options.tiedLayersTogether)) return;
    if (options.memoryCapBytes && p.peakMemoryBytes > *options.memoryCapBytes) return;
    all.push_back(p);
    best.feasible = true;
    best.primary = std::min(best.primary, primaryOf(p, options));
  });
  for (const Partition& p : all)
    if (primaryOf(p, options) == best.primary) best.secondary = std::min(best.secondary, secondaryOf(p, options));
  return best;
}

void expectWellFormed(const Partition& p, int n, int stages) {
  ASSERT_TRUE(p.ok) << p.reason;
  ASSERT_EQ(static_cast<int>(p.stages.size()), stages);
  ASSERT_EQ(static_cast<int>(p.stageOfLayer.size()), n);
  EXPECT_EQ(p.stages.front().firstLayer, 0);
  EXPECT_EQ(p.stages.back().endLayer, n);
  for (size_t k = 0; k < p.stages.size(); ++k) {
    EXPECT_GT(p.stages[k].numLayers(), 0) << "stage " << k << " is empty";
    if (k > 0) {
      EXPECT_EQ(p.stages[k].firstLayer, p.stages[k - 1].endLayer);
    }
  }
  for (int i = 1; i < n; ++i) EXPECT_LE(p.stageOfLayer[static_cast<size_t>(i - 1)], p.stageOfLayer[static_cast<size_t>(i)]);
}

TEST(Partitioner, EqualsBruteForceOnRandomInstances) {
  std::mt19937 rng(20261122);
  std::uniform_int_distribution<int> small(0, 9);
  std::lognormal_distribution<double> heavy(0.0, 1.0);
  int checked = 0, infeasible = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    const int n = 1 + trial % 9;
    const int stages = 1 + static_cast<int>(rng() % static_cast<unsigned>(n));
    std::vector<LayerCost> layers(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      LayerCost& l = layers[static_cast<size_t>(i)];
      l.name = "l" + std::to_string(i);
      const bool integer = trial % 3 != 0;
      l.forwardSeconds = integer ? small(rng) : heavy(rng);
      l.backwardSeconds = integer ? 2 * small(rng) : 2 * heavy(rng);
      l.parameterBytes = static_cast<size_t>(small(rng)) * 100;
      l.optimizerStateBytes = static_cast<size_t>(small(rng)) * 10;
      l.stashBytes = static_cast<size_t>(small(rng)) * 7;
      l.activationBytes = static_cast<size_t>(small(rng)) * 1000;
      if (trial % 5 == 0 && small(rng) < 3) {  // some tied layers
        l.tieGroup = small(rng) % 2;
        l.tiedBytes = l.parameterBytes / 2;
      }
    }
    PartitionOptions options;
    options.objective = trial % 2 ? Objective::kSpeed : Objective::kMemory;
    options.tiedLayersTogether = trial % 10 == 0;
    const double weights[] = {0.0, 0.2, 0.5, 0.8, 1.0};
    if (trial % 3 == 1) options.memoryWeight = weights[(trial / 3) % 5];
    options.includeSendCost = trial % 4 == 1;
    options.link.latencySeconds = 0.5;
    options.link.bytesPerSecond = 4000;
    for (int k = 0; k < stages; ++k) options.inFlight.push_back(1 + static_cast<int>(rng() % 4));
    if (trial % 7 == 0) options.memoryCapBytes = static_cast<size_t>(small(rng)) * 300;
    const Brute brute = bruteForce(layers, stages, options);
    const Partition got = partition(layers, stages, options);
    ASSERT_EQ(got.ok, brute.feasible) << "trial " << trial << ": " << got.reason;
    if (!got.ok) {
      ++infeasible;
      continue;
    }
    expectWellFormed(got, n, stages);
    EXPECT_TRUE(respectsTies(layers, got.stageOfLayer, options.tiedLayersTogether)) << "trial " << trial;
    EXPECT_EQ(primaryOf(got, options), brute.primary) << "trial " << trial;
    EXPECT_EQ(secondaryOf(got, options), brute.secondary) << "trial " << trial << " (tie-break)";
    if (options.memoryCapBytes) {
      EXPECT_LE(got.peakMemoryBytes, *options.memoryCapBytes);
    }
    ++checked;
  }
  EXPECT_GT(checked, 1000);
  EXPECT_GT(infeasible, 0);  // the cap and the ties did make some instances impossible
}

// DeepSpeed PR #4312: partition_balanced([1,1,1,1,1], 4) returned an empty last stage.
TEST(Partitioner, FiveEqualLayersOnFourStagesLeaveNoStageEmpty) {
  const Partition p = partition(layersFromTimes({1, 1, 1, 1, 1}), 4, {});
  expectWellFormed(p, 5, 4);
  EXPECT_EQ(p.bottleneckSeconds, 2);
}

TEST(Partitioner, ZerosStillGiveEveryStageALayer) {
  for (int stages = 1; stages <= 6; ++stages) {
    const Partition p = partition(layersFromTimes({0, 0, 0, 0, 0, 0}), stages, {});
    expectWellFormed(p, 6, stages);
    EXPECT_EQ(p.bottleneckSeconds, 0);
  }
}

TEST(Partitioner, OneStagePerLayerWhenStagesEqualLayers) {
  const Partition p = partition(layersFromTimes({3, 1, 4, 1, 5}), 5, {});
  expectWellFormed(p, 5, 5);
  EXPECT_EQ(p.bottleneckSeconds, 5);
}

TEST(Partitioner, ASingleHugeLayerIsTheBottleneckAlone) {
  const Partition p = partition(layersFromTimes({1, 1, 100, 1, 1, 1}), 3, {});
  expectWellFormed(p, 6, 3);
  EXPECT_EQ(p.bottleneckSeconds, 100);
  EXPECT_EQ(p.stages[1].firstLayer, 2);  // alone, or with neighbours only if that costs nothing
  // Tie-break on memory cannot make the huge layer's stage slower.
  EXPECT_LE(p.stages[0].timeSeconds, 100);
}

TEST(Partitioner, MoreStagesThanLayersIsAClearError) {
  try {
    partition(layersFromTimes({1, 2, 3}), 4, {});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("4 stages (partitions x virtual_stages) but the model has only 3 layer(s)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(partition(layersFromTimes({1}), 0, {}), ConfigError);
  EXPECT_THROW(partition({}, 1, {}), ConfigError);
  PartitionOptions wrongInFlight;
  wrongInFlight.inFlight = {1, 2, 3};
  EXPECT_THROW(partition(layersFromTimes({1, 2}), 2, wrongInFlight), ConfigError);
  EXPECT_THROW(partition(layersFromTimes({1, -2}), 2, {}), ConfigError);
  EXPECT_THROW(partition(layersFromTimes({1, std::nan("")}), 2, {}), ConfigError);
}

// 1F1B stashes p - s microbatches on stage s: memory mode gives stage 0 fewer layers.
TEST(Partitioner, MemoryModeGivesTheFirstStageFewerLayersUnderOneFOneB) {
  std::vector<LayerCost> layers = layersFromTimes(std::vector<double>(12, 1.0));
  for (LayerCost& l : layers) {
    l.parameterBytes = 100;
    l.stashBytes = 100;
  }
  PartitionOptions options;
  options.objective = Objective::kMemory;
  options.inFlight = {4, 3, 2, 1};
  const Partition p = partition(layers, 4, options);
  expectWellFormed(p, 12, 4);
  EXPECT_LT(p.stages[0].numLayers(), p.stages[3].numLayers());
  // A layer costs 100 + inFlight * 100 bytes: 500 on stage 0, 400, 300, 200 on stage 3.
  // Layers 2 + 2 + 3 + 5 fit 1000 B per stage; no split of 12 layers does better.
  EXPECT_EQ(p.peakMemoryBytes, 1000u);
  options.objective = Objective::kSpeed;
  EXPECT_EQ(partition(layers, 4, options).bottleneckSeconds, 3.0);
}

TEST(Partitioner, MemoryCapThatCannotBeMetSaysSoWithTheBestAchievable) {
  std::vector<LayerCost> layers = layersFromTimes({1, 1, 1, 1});
  for (LayerCost& l : layers) l.parameterBytes = 1024;
  PartitionOptions options;
  options.memoryCapBytes = 1500;  // two stages of two layers need 2048 B each
  const Partition p = partition(layers, 2, options);
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.reason.find("cannot"), std::string::npos) << p.reason;
  EXPECT_NE(p.reason.find("memory cap of 1.46 KiB"), std::string::npos) << p.reason;
  EXPECT_NE(p.reason.find("smallest achievable peak stage memory is 2.00 KiB (2048 bytes)"), std::string::npos)
      << p.reason;
  options.memoryCapBytes = 2048;
  EXPECT_TRUE(partition(layers, 2, options).ok);
}

TEST(Partitioner, SpeedModeRespectsTheMemoryCapAtTheCostOfTime) {
  std::vector<LayerCost> layers = layersFromTimes({1, 1, 1, 10});
  layers[0].parameterBytes = 100;
  layers[1].parameterBytes = 100;
  layers[2].parameterBytes = 100;
  PartitionOptions options;
  EXPECT_EQ(partition(layers, 2, options).bottleneckSeconds, 10);  // [0,1,2] [3]
  options.memoryCapBytes = 200;                                    // forbids three on one stage
  const Partition capped = partition(layers, 2, options);
  ASSERT_TRUE(capped.ok) << capped.reason;
  EXPECT_EQ(capped.bottleneckSeconds, 11);  // [0,1] [2,3]
}

TEST(Partitioner, SendCostCountsWhenAsked) {
  std::vector<LayerCost> layers = layersFromTimes({1, 1, 1, 1});
  layers[0].activationBytes = 1000;  // cutting after layer 0 is expensive
  PartitionOptions options;
  options.includeSendCost = true;
  options.link.bytesPerSecond = 100;  // 10 s for 1000 B
  const Partition p = partition(layers, 2, options);
  ASSERT_TRUE(p.ok);
  EXPECT_NE(p.stages[0].endLayer, 1);
  EXPECT_EQ(p.stages[1].sendSeconds, 0);  // the last stage sends nothing forward
}

TEST(Partitioner, TiedLayersShareAStageWhenAskedTo) {
  std::vector<LayerCost> layers = layersFromTimes({5, 1, 1, 1, 5});
  layers[0].tieGroup = 7;  // embedding
  layers[1].tieGroup = 7;  // uses the embedding's weight
  PartitionOptions together;
  together.tiedLayersTogether = true;
  const Partition p = partition(layers, 3, together);
  expectWellFormed(p, 5, 3);
  EXPECT_EQ(p.stageOfLayer[0], p.stageOfLayer[1]);
  // Embedding tied to the head: everything must be on one stage; two stages cannot work.
  layers[1].tieGroup = -1;
  layers[4].tieGroup = 7;
  const Partition impossible = partition(layers, 2, together);
  EXPECT_FALSE(impossible.ok);
  EXPECT_NE(impossible.reason.find("tie_group"), std::string::npos) << impossible.reason;
  EXPECT_TRUE(partition(layers, 1, together).ok);
  // By default each stage holds a copy: embedding and head may be apart.
  const Partition apart = partition(layers, 2, {});
  expectWellFormed(apart, 5, 2);
  EXPECT_NE(apart.stageOfLayer[0], apart.stageOfLayer[4]);
}

// A stage (or rank) holding several layers of one tie group holds the shared tensor once.
TEST(Partitioner, TiedTensorCountsOncePerStageAndRank) {
  std::vector<LayerCost> layers = layersFromTimes({1, 1, 1, 1});
  const size_t own[] = {100, 10, 20, 300};
  for (size_t i = 0; i < 4; ++i) layers[i].parameterBytes = own[i];
  layers[0].tieGroup = layers[3].tieGroup = 1;  // embedding 0 and head 3 share 80 bytes
  layers[0].tiedBytes = layers[3].tiedBytes = 80;
  layers[1].tieGroup = layers[2].tieGroup = 2;  // 1 and 2 share 5 bytes
  layers[1].tiedBytes = layers[2].tiedBytes = 5;
  const struct {
    std::vector<int> bounds;
    std::vector<size_t> stageBytes;
  } table[] = {
      {{0, 4}, {430 - 80 - 5}},              // one stage: both ties deduplicated
      {{0, 2, 4}, {110, 320}},               // [0,1] [2,3]: every tie split, two copies each
      {{0, 3, 4}, {130 - 5, 300}},           // [0,1,2] [3]: tie 2 inside stage 0
      {{0, 1, 3, 4}, {100, 30 - 5, 300}},    // tie 2 inside the middle stage
      {{0, 1, 2, 3, 4}, {100, 10, 20, 300}}, // every layer alone
  };
  for (const auto& row : table) {
    const Partition p = evaluateBounds(layers, row.bounds, {});
    ASSERT_EQ(p.stages.size(), row.stageBytes.size());
    for (size_t k = 0; k < p.stages.size(); ++k)
      EXPECT_EQ(p.stages[k].staticBytes, row.stageBytes[k]) << "bounds " << c10::Join(",", row.bounds) << " stage " << k;
  }
  // Per rank: stages 0 and 2 (of [0] [1] [2] [3], 2 ranks) share nothing; 0 and 3 would.
  const Partition four = evaluateBounds(layers, {0, 1, 2, 3, 4}, {});
  EXPECT_EQ(rankStaticBytes(layers, four, 2), (std::vector<size_t>{100 + 20, 10 + 300}));
  EXPECT_EQ(rankStaticBytes(layers, four, 1), (std::vector<size_t>{430 - 80 - 5}));
  const Partition two = evaluateBounds(layers, {0, 2, 4}, {});
  EXPECT_EQ(rankStaticBytes(layers, two, 2), (std::vector<size_t>{110, 320}));
}

// SageMaker's memory_weight: cost = w * memory / M + (1 - w) * time / T per stage.
TEST(Partitioner, MemoryWeightTradesMemoryAgainstTime) {
  // Layer 0 is slow and small, layer 3 big and fast: T = 7 s, M = 800 bytes.
  std::vector<LayerCost> layers = layersFromTimes({4, 1, 1, 1});
  const size_t bytes[] = {0, 100, 200, 500};
  for (size_t i = 0; i < 4; ++i) layers[i].parameterBytes = bytes[i];
  // Hand-computed: each weight picks a different cut, and the optimum is unique.
  const struct {
    double weight;
    int expectedCut;
    double expectedCost;
  } table[] = {
      {0.0, 1, 4.0 / 7},                          // time only: [0] [1,2,3] (4 s vs 3 s)
      {0.5, 2, 0.5 * 700.0 / 800 + 0.5 * 2.0 / 7},  // [0,1] [2,3]: the second stage costs most
      {1.0, 3, 500.0 / 800},                      // memory only: the big layer alone
  };
  for (const auto& row : table) {
    PartitionOptions options;
    options.memoryWeight = row.weight;
    const Partition p = partition(layers, 2, options);
    ASSERT_TRUE(p.ok) << p.reason;
    EXPECT_EQ(p.stages[1].firstLayer, row.expectedCut) << "w=" << row.weight;
    EXPECT_DOUBLE_EQ(p.bottleneckCost, row.expectedCost) << "w=" << row.weight;
  }
  PartitionOptions bad;
  bad.memoryWeight = 1.5;
  EXPECT_THROW(partition(layers, 2, bad), ConfigError);
}

TEST(Partitioner, ManualPartitionIsValidatedAndPriced) {
  std::vector<LayerCost> layers = layersFromTimes({1, 2, 3, 4});
  const Partition p = manualPartition(layers, {0, 0, 1, 1}, 2, {});
  expectWellFormed(p, 4, 2);
  EXPECT_EQ(p.bottleneckSeconds, 7);
  auto error = [&](const std::vector<int>& stageOf, int stages) {
    try {
      manualPartition(layers, stageOf, stages, {});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error({0, 1, 0, 1}, 2).find("layer 2 (\"l2\") is on stage 0 after a layer on stage 1"), std::string::npos);
  EXPECT_NE(error({0, 0, 2, 2}, 3).find("stage 1 has no layer"), std::string::npos);
  EXPECT_NE(error({0, 0, 1, 1}, 3).find("every stage needs at least one layer"), std::string::npos);
  EXPECT_NE(error({0, 0, 1, 5}, 2).find("is on stage 5; stages are 0..1"), std::string::npos);
  EXPECT_NE(error({1, 1, 1, 1}, 2).find("stage 0 has no layer"), std::string::npos);
  EXPECT_NE(error({0, 0, 1}, 2).find("3 stage numbers for 4 layers"), std::string::npos);
  layers[0].tieGroup = 1;
  layers[3].tieGroup = 1;
  EXPECT_TRUE(manualPartition(layers, {0, 0, 1, 1}, 2, {}).ok);  // each stage holds a copy
  PartitionOptions together;
  together.tiedLayersTogether = true;
  try {
    manualPartition(layers, {0, 0, 1, 1}, 2, together);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("tied layers must be on one stage"), std::string::npos) << e.what();
  }
}

TEST(Partitioner, ObjectiveNames) {
  EXPECT_EQ(parseObjective("speed"), Objective::kSpeed);
  EXPECT_EQ(parseObjective("memory"), Objective::kMemory);
  EXPECT_THROW(parseObjective("fast"), ConfigError);
}

}  // namespace
}  // namespace strata::pipeline
