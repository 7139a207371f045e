// Pipeline features beside fidelity: bad input fails on every rank with the field and the
// value; manual partitions; local state; the layout helpers.
#include <gtest/gtest.h>

#include <cstdlib>

#include "collectives/communicator.h"
#include "pp/pp_testing.h"

namespace strata::testing {
namespace {

std::string mpConfig(const std::string& extra) {
  const bool hybrid = strata::size() > 2;
  return std::string(R"({"enabled": true, "partitions": 2, "microbatches": 4, "ddp": )") +
         (hybrid ? "true" : "false") + extra + "}";
}

// The stage links these tests run over: shared memory between ranks of one host, TCP between
// hosts or when STRATA_P2P_TRANSPORT=tcp (pp_mpi_tcp_np2), so each registration covers the
// link it claims to.
TEST(PipelineLinks, ShmOnOneHostUnlessTcpIsForced) {
  auto& comm = strata::world().communicator();
  const char* forced = std::getenv("STRATA_P2P_TRANSPORT");
  const bool tcp = forced != nullptr && std::string(forced) == "tcp";
  for (int peer = 0; peer < comm.size(); ++peer) {
    if (peer == comm.rank()) continue;
    const bool sameHost = comm.topology().hostOf[peer] == comm.topology().hostOf[comm.rank()];
    EXPECT_EQ(comm.p2pLink(peer), sameHost && !tcp ? transport::Kind::kShm : transport::Kind::kTcp)
        << "peer " << peer;
  }
}

TEST(PipelineBadInput, MorePartitionsThanLayers) {
  expectErrorEverywhere<ConfigError>(
      [] {
        torch::nn::Sequential net(torch::nn::Linear(8, 4));
        DistributedModelOptions o;
        o.modelParallel = mpConfig("");
        DistributedModel model(net, o);
      },
      {"/modelparallel/partitions", "2", "only 1 layers"});
}

TEST(PipelineBadInput, MicrobatchesNotDividingTheBatch) {
  auto net = makeNet();
  DistributedModelOptions o;
  o.modelParallel = mpConfig("");
  DistributedModel model(net, o);
  expectErrorEverywhere<ConfigError>([&] { model.step(torch::randn({10, 8}), torch::randn({10, 4}), mseStep); },
                    {"/modelparallel/microbatches", "4", "10"});
}

TEST(PipelineBadInput, RanksNotDivisibleByPartitions) {
  expectErrorEverywhere<ConfigError>(
      [] {
        auto net = makeNet();
        DistributedModelOptions o;
        o.modelParallel = R"({"enabled": true, "partitions": 3, "microbatches": 4, "ddp": true})";
        DistributedModel model(net, o);
      },
      {"partitions", "3", std::to_string(strata::size())});
}

TEST(PipelineBadInput, UnknownScheduleName) {
  expectErrorEverywhere<ConfigError>(
      [] {
        auto net = makeNet();
        DistributedModelOptions o;
        o.modelParallel = mpConfig(R"(, "pipeline": "zigzag")");
        DistributedModel model(net, o);
      },
      {"/modelparallel/pipeline", "zigzag"});
}

// Rank 0 asks for zero_bubble, the others for interleaved: their programs would not pair up.
// Every rank gets the same ConfigError naming the setting and both values, nobody hangs.
TEST(PipelineBadInput, RanksWithDifferentSchedules) {
  expectErrorEverywhere<ConfigError>(
      [] {
        auto net = makeNet();
        DistributedModelOptions o;
        o.modelParallel = mpConfig(strata::rank() == 0 ? R"(, "pipeline": "zero_bubble")" : R"(, "pipeline": "interleaved")");
        DistributedModel model(net, o);
      },
      {"/modelparallel", "rank(s) 1", "differ from rank 0"});
  // The ranks that differ see both values.
  try {
    auto net = makeNet();
    DistributedModelOptions o;
    o.modelParallel = mpConfig(strata::rank() == 0 ? R"(, "pipeline": "zero_bubble")" : R"(, "pipeline": "interleaved")");
    DistributedModel model(net, o);
  } catch (const ConfigError& e) {
    if (strata::rank() != 0) {
      EXPECT_NE(std::string(e.what()).find("pipeline: \"zero_bubble\""), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("pipeline: \"interleaved\""), std::string::npos) << e.what();
    }
  }
}

TEST(PipelineBadInput, ManualPartitionNamingAnUnknownLayer) {
  expectErrorEverywhere<ConfigError>(
      [] {
        auto net = makeNet();
        DistributedModelOptions o;
        o.modelParallel = mpConfig(R"(, "auto_partition": false, "manual_partition": {"0": 0, "fc9": 1})");
        DistributedModel model(net, o);
      },
      {"/modelparallel/manual_partition/fc9", "fc9"});
}

TEST(PipelineFeatures, ManualPartitionIsUsedAndLocalStateHoldsOnlyThisStage) {
  auto net = makeNet();
  DistributedModelOptions o;
  o.modelParallel = mpConfig(R"(, "auto_partition": false, "manual_partition": {"0": 0, "1": 0, "2": 1, "3": 1, "4": 1, "5": 1})");
  DistributedModel model(net, o);
  EXPECT_FALSE(model.partitioned());
  const int replicas = strata::size() / 2;
  auto [x, y] = batchFor(0, replicas);
  model.step(replicaSlice(x, model.dp_rank()), replicaSlice(y, model.dp_rank()), mseStep);
  EXPECT_TRUE(model.partitioned());
  EXPECT_EQ(model.pipeline_stats().stageFirstLayer, (std::vector<int>{0, 2}));
  std::vector<std::string> keys;
  for (const auto& item : model.local_state_dict()) keys.push_back(item.key());
  const std::vector<std::string> expected =
      model.pp_rank() == 0 ? std::vector<std::string>{"0.weight", "0.bias"}
                           : std::vector<std::string>{"2.weight", "2.bias", "5.weight", "5.bias"};
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(model.local_parameters().size(), expected.size());
  const PipelineStats s = model.pipeline_stats();
  EXPECT_GT(s.peakInFlight, 0);
  EXPECT_GT(s.predictedStepSeconds, 0);
  EXPECT_FALSE(s.plan.empty());
}

TEST(PipelineFeatures, LayoutHelpersFollowTheTopology) {
  auto net = makeNet();
  DistributedModelOptions o;
  o.modelParallel = mpConfig("");
  DistributedModel model(net, o);
  // cluster placement: the ranks of one pipeline are adjacent.
  EXPECT_EQ(model.pp_rank(), strata::rank() % 2);
  EXPECT_EQ(model.dp_rank(), strata::rank() / 2);
}

}  // namespace
}  // namespace strata::testing

namespace strata::testing {
namespace {

// Layers 0 and 2 share one weight tensor: no cut may separate them (auto partition), and a
// manual partition that does is an error naming the layer.
struct TiedLinearImpl : torch::nn::Module {
  explicit TiedLinearImpl(torch::Tensor shared) { weight = register_parameter("weight", std::move(shared)); }
  torch::Tensor forward(const torch::Tensor& x) { return torch::matmul(x, weight.t()); }
  torch::Tensor weight;
};
TORCH_MODULE(TiedLinear);

torch::nn::Sequential tiedNet() {
  torch::manual_seed(7);
  torch::nn::Linear a(8, 8);
  return torch::nn::Sequential(a, torch::nn::Tanh(), TiedLinear(a->weight), torch::nn::Tanh(), torch::nn::Linear(8, 4),
                               torch::nn::Tanh());
}

// One tensor used on two stages (each rank holds the whole Sequential, so the same tensor):
// the automatic partition may now cut between the uses, and a manual one that does trains
// exactly as one process (the gradient is summed across the stages).
void expectTiedGradientsOfOneProcess(const std::string& extra) {
  auto net = tiedNet();
  auto reference = tiedNet();
  DistributedModelOptions o;
  o.modelParallel = mpConfig(extra);
  DistributedModel model(net, o);
  const int replicas = strata::size() / 2;
  auto [x, y] = batchFor(0, replicas);
  model.step(replicaSlice(x, model.dp_rank()), replicaSlice(y, model.dp_rank()), mseStep);
  std::vector<std::map<std::string, torch::Tensor>> grads;
  for (int r = 0; r < replicas; ++r) {
    for (auto& p : reference->parameters()) p.mutable_grad() = torch::Tensor();
    referenceAccumulate(reference, replicaSlice(x, r), replicaSlice(y, r), 4, 0, 0);
    grads.push_back(gradsOf(*reference));
  }
  int compared = 0;
  for (const auto& item : model.local_state_dict()) {
    torch::Tensor g = grads[0].at(item.key());
    for (int r = 1; r < replicas; ++r) g = g + grads[static_cast<size_t>(r)].at(item.key());
    if (replicas > 1) g = g / replicas;
    EXPECT_TRUE(torch::equal(item.value().grad(), g)) << item.key();
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

TEST(PipelineFeatures, TiedLayersOnDifferentStagesMatchOneProcess) {
  expectTiedGradientsOfOneProcess(
      R"(, "auto_partition": false, "manual_partition": {"0": 0, "1": 0, "2": 1, "3": 1, "4": 1, "5": 1})");
}

TEST(PipelineFeatures, TiedLayersOnOneStageMatchOneProcess) {
  expectTiedGradientsOfOneProcess(
      R"(, "auto_partition": false, "manual_partition": {"0": 0, "1": 0, "2": 0, "3": 0, "4": 1, "5": 1})");
}

}  // namespace
}  // namespace strata::testing
