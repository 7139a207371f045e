// A tiny language model described as a LayerList (an embedding, a group of blocks, a head
// tied to the embedding), its plain-libtorch twin for the single-process reference, and
// configs for the world sizes the pipeline tests run at (np 2, np 4).
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "pp/pp_testing.h"
#include "strata/nested_sequential.h"
#include "strata/strata.h"

namespace strata::testing {

constexpr int64_t kVocab = 11, kWidth = 8, kTokens = 5;

// The head's weight is the embedding's when tied (forward: x W^T, as a bias-free Linear).
struct TiedHeadImpl : torch::nn::Module {
  explicit TiedHeadImpl(torch::Tensor shared) { weight = register_parameter("weight", std::move(shared)); }
  torch::Tensor forward(const torch::Tensor& x) { return torch::nn::functional::linear(x, weight); }
  torch::Tensor weight;
};
TORCH_MODULE(TiedHead);

// A block is itself a Sequential (nestable: libtorch cannot hold a plain one in another).
inline strata::NestedSequential makeBlock() {
  return strata::NestedSequential(torch::nn::Linear(kWidth, kWidth), torch::nn::Tanh());
}

inline LayerList tinyLm(int blocks, bool tied = true) {
  LayerList group;
  for (int i = 0; i < blocks; ++i) group.add(std::to_string(i), [] { return makeBlock(); });
  LayerList lm;
  lm.add<torch::nn::Embedding>("embed", kVocab, kWidth)
      .add("blocks", group)
      .add("head", [] { return torch::nn::Linear(torch::nn::LinearOptions(kWidth, kVocab).bias(false)); });
  if (tied) lm.tie("embed.weight", "head.weight");
  return lm;
}

// The same model in plain libtorch, with one tensor for embed.weight and head.weight, and
// the values of `state` (paths as in the LayerList).
inline torch::nn::Sequential plainTinyLm(int blocks, const std::map<std::string, torch::Tensor>& state) {
  torch::nn::Embedding embed(kVocab, kWidth);
  strata::NestedSequential group;
  for (int i = 0; i < blocks; ++i) group->push_back(std::to_string(i), torch::nn::AnyModule(makeBlock().ptr()));
  torch::nn::Sequential net;
  net->push_back("embed", embed);
  net->push_back("blocks", torch::nn::AnyModule(group.ptr()));
  net->push_back("head", TiedHead(embed->weight));
  torch::NoGradGuard noGrad;
  for (auto& p : net->named_parameters(true)) p.value().copy_(state.at(p.key()));
  return net;
}

inline std::pair<torch::Tensor, torch::Tensor> tokenBatch(int step, int64_t batch) {
  torch::manual_seed(9000 + step);
  return {torch::randint(kVocab, {batch, kTokens}), torch::randint(kVocab, {batch, kTokens})};
}

inline torch::Tensor lmLoss(const torch::Tensor& logits, const torch::Tensor& y) {
  return torch::nn::functional::cross_entropy(logits.reshape({-1, kVocab}), y.reshape({-1}));
}

inline torch::Tensor lmStep(DistributedModel& m, const torch::Tensor& x, const torch::Tensor& y) {
  auto loss = lmLoss(m(x), y);
  m.backward(loss);
  return loss;
}

// A group of this rank alone: a model on it is a single process (no partner ranks).
inline Group& soloGroup() {
  static std::shared_ptr<Group> solo = newGroup({strata::rank()});
  return *solo;
}

inline DistributedModelOptions singleProcess() {
  DistributedModelOptions o;
  o.group = &soloGroup();
  o.modelParallel = R"({"enabled": false})";
  o.checkModelsMatch = false;
  return o;
}

inline std::map<std::string, torch::Tensor> stateOf(const DistributedModel& m) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : m.local_state_dict()) out[item.key()] = item.value().detach().clone();
  return out;
}

}  // namespace strata::testing
