// The start-up profile measured by the layers' provisional owners (issue 14 item 2): every
// rank profiles and builds only its provisional block (an even split of the LayerList's
// layers), every rank (replicas included) ends with the same partition, a rank builds no
// layer outside its block and its final layers, and training matches one process. Under
// mpirun -np 2 and -np 4 (a pipeline of size() stages; at np 4 also 2 stages x 2 replicas).
#include <gtest/gtest.h>

#include <set>

#include "pp/pp_layer_list_testing.h"

namespace strata::testing {
namespace owner_profile_test {

constexpr int kBlocks = 6;
constexpr int kLayers = kBlocks + 2;  // embed, blocks, head
constexpr int64_t kBatch = 8;         // per pipeline replica and step

DistributedModelOptions pipelineOf(int partitions) {
  const int replicas = strata::size() / partitions;
  DistributedModelOptions o;
  // SGD without momentum keeps no state: plan with none.
  o.modelParallel = c10::str(R"({"enabled": true, "partitions": )", partitions,
                             R"(, "microbatches": 4, "optimizer_state_factor": 0, "ddp": )",
                             replicas > 1 ? "true" : "false", "}");
  return o;
}

// The cut of every world rank, flattened in world-rank order.
std::vector<int32_t> everyRanksCut(const std::vector<int>& cut) {
  std::vector<int32_t> mine(cut.begin(), cut.end());
  std::vector<int32_t> all(mine.size() * static_cast<size_t>(strata::size()));
  strata::world().allgather(mine.data(), all.data(), mine.size(), DType::kInt32);
  return all;
}

void checkProfiledAndBuiltLayers(int partitions) {
  torch::manual_seed(5);
  DistributedModel model(tinyLm(kBlocks), tokenBatch(0, kBatch).first, pipelineOf(partitions));
  const PipelineStats stats = model.pipeline_stats();
  const int me = model.pp_rank();
  // The provisional block: 8 layers split evenly by count, the first ranks one more.
  const int base = kLayers / partitions, extra = kLayers % partitions;
  const int first = me * base + std::min(me, extra);
  const int end = first + base + (me < extra ? 1 : 0);
  EXPECT_EQ(stats.profiledFirstLayer, first) << "pipeline rank " << me;
  EXPECT_EQ(stats.profiledEndLayer, end) << "pipeline rank " << me;

  // Every world rank cut the model the same way.
  ASSERT_EQ(stats.stageFirstLayer.size(), static_cast<size_t>(partitions));
  const std::vector<int32_t> all = everyRanksCut(stats.stageFirstLayer);
  for (int r = 1; r < strata::size(); ++r)
    for (size_t s = 0; s < stats.stageFirstLayer.size(); ++s)
      EXPECT_EQ(all[static_cast<size_t>(r) * stats.stageFirstLayer.size() + s], all[s])
          << "world rank " << r << " stage " << s;

  // Built: the block, plus the final layers outside it, each once; nothing else.
  const int ownFirst = stats.stageFirstLayer[static_cast<size_t>(me)];
  const int ownEnd = me + 1 < partitions ? stats.stageFirstLayer[static_cast<size_t>(me) + 1] : kLayers;
  std::set<int> expected;
  for (int i = first; i < end; ++i) expected.insert(i);
  for (int i = ownFirst; i < ownEnd; ++i) expected.insert(i);
  EXPECT_EQ(stats.layersBuilt, static_cast<int>(expected.size()))
      << "pipeline rank " << me << ": block " << first << ".." << end - 1 << ", owns " << ownFirst << ".."
      << ownEnd - 1;
}

TEST(OwnerProfile, EachRankProfilesOnlyItsBlockAndAllAgreeOnTheCut) { checkProfiledAndBuiltLayers(strata::size()); }

TEST(OwnerProfile, ReplicasAgreeOnTheCut) {
  if (strata::size() % 2 != 0) GTEST_FAIL() << "needs an even world, got " << strata::size();
  checkProfiledAndBuiltLayers(2);
}

// Three SGD steps in a pipeline of size() stages against the same model in one process.
TEST(OwnerProfile, LossEqualsOneProcess) {
  torch::manual_seed(11);
  DistributedModel one(tinyLm(kBlocks), tokenBatch(0, kBatch).first, singleProcess());
  DistributedOptimizer oneOpt(torch::optim::SGD(one.parameters(), torch::optim::SGDOptions(0.1)), one);
  torch::manual_seed(11);
  DistributedModel piped(tinyLm(kBlocks), tokenBatch(0, kBatch).first, pipelineOf(strata::size()));
  DistributedOptimizer pipedOpt(torch::optim::SGD(piped.parameters(), torch::optim::SGDOptions(0.1)), piped);
  for (int step = 0; step < 3; ++step) {
    const auto [x, y] = tokenBatch(step, kBatch);
    oneOpt.zero_grad();
    const double reference = one.step(x, y, lmStep).reduce_mean().item<double>();
    oneOpt.step();
    pipedOpt.zero_grad();
    const double loss = piped.step(x, y, lmStep).reduce_mean().item<double>();
    pipedOpt.step();
    EXPECT_NEAR(loss, reference, 1e-5 * std::abs(reference)) << "step " << step << " rank " << strata::rank();
  }
}

}  // namespace owner_profile_test
}  // namespace strata::testing
