// A model described without building it: an ordered list of named layer factories
// (optionally grouped, like a transformer's blocks) and the parameters its layers share.
// DistributedModel builds from it only the layers of this rank's pipeline stages, so the
// parameters, gradients and optimizer state of other stages never exist on this rank
// (docs/pipeline.md, "Describing a model without building it").
//
//   strata::LayerList blocks;
//   for (int i = 0; i < n; ++i) blocks.add<Block>(std::to_string(i), d, heads);
//   strata::LayerList gpt;
//   gpt.add<Embeddings>("embed", vocab, d, seq)              // built as Embeddings(vocab, d, seq)
//       .add("blocks", blocks)                               // layers "blocks.0" .. "blocks.<n-1>"
//       .add<torch::nn::LayerNorm>("ln_f", torch::nn::LayerNormOptions({d}))
//       .add("lm_head", [=] { return torch::nn::Linear(torch::nn::LinearOptions(d, vocab).bias(false)); })
//       .tie("embed.wte.weight", "lm_head.weight");
//   strata::DistributedModel model(gpt, exampleBatch);      // the batch step() will get
//
// Layers run in order; each forward takes and returns one tensor whose dimension 0 is the
// batch. Parameter paths are "<layer path>.<path in the layer>" ("blocks.3.attn.qkv.weight"),
// as in the module DistributedModel::module() returns.
//
// Initial weights do not depend on the partition: every layer is built right after the
// default CPU generator is seeded with initSeed(seed, layer path), where seed is the
// generator's seed on world rank 0 (torch::manual_seed(...) before constructing the model),
// and the generator's state is restored afterwards. One process and any `partitions` build
// bitwise the same initial model.
//
// Ties: tie(a, b) makes parameter b share parameter a's tensor (a's initial value), as
// `head.weight = wte.weight` in PyTorch. In one process, and when both layers land on one
// rank, it is one tensor (listed once by parameters()). On different pipeline ranks each
// rank holds a copy; the copies' gradients are summed after backward (before the optimizer
// step), so the copies stay bitwise equal.
//
// A factory may be called more than once (once to profile the layer on the rank whose
// provisional block holds it, pipeline/adapter/owner_profile.h, then on each rank that holds
// it after planning) and must build the same layer every time. A LayerList is a
// plain value: copy it freely. Not thread-safe.
#pragma once

#include <torch/nn/modules/container/any.h>

#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace strata {

namespace pipeline {
class ModelBuilder;
}

class LayerList {
 public:
  using Factory = std::function<torch::nn::AnyModule()>;

  // A layer built as M(args...) (args are copied into the factory).
  template <typename M, typename... Args>
  LayerList& add(std::string name, Args&&... args) {
    return addFactory(std::move(name), [stored = std::make_tuple(std::decay_t<Args>(std::forward<Args>(args))...)] {
      return torch::nn::AnyModule(std::apply([](const auto&... a) { return M(a...); }, stored));
    });
  }

  // A layer built by factory(): any module holder, shared_ptr to a module, module value or
  // AnyModule whose forward takes one tensor.
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, LayerList>>>
  LayerList& add(std::string name, F&& factory) {
    static_assert(std::is_invocable_v<std::decay_t<F>&>, "LayerList::add(name, factory): factory() builds the layer");
    return addFactory(std::move(name), [f = std::forward<F>(factory)]() mutable { return torch::nn::AnyModule(f()); });
  }

  // A group of layers under one name ("blocks"): its layers are "blocks.<their name>" and
  // are placed one by one (a pipeline may cut inside the group). Groups may nest.
  LayerList& add(std::string name, LayerList group);

  // Parameter `second` shares parameter `first` (paths in this list, e.g. "embed.wte.weight"
  // and "lm_head.weight"; a group's ties are relative to the group): same shape and dtype,
  // first's initial value. Checked when the model is built (ConfigError naming both paths
  // and shapes on every rank).
  LayerList& tie(std::string first, std::string second);

  // The layers in execution order, with their full paths ("blocks.3").
  struct Layer {
    std::string path;
    Factory factory;
  };
  std::vector<Layer> layers() const;
  // Every tie with full paths (a group's prefixed with the group's path).
  std::vector<std::pair<std::string, std::string>> ties() const;
  bool empty() const { return items_.empty(); }

 private:
  friend class pipeline::ModelBuilder;  // walks the tree to assemble the module
  struct Item {
    std::string name;
    Factory factory;                   // a layer, or
    std::shared_ptr<LayerList> group;  // a group
  };
  LayerList& addFactory(std::string name, Factory factory);
  void checkName(const std::string& name) const;
  void flatten(const std::string& prefix, std::vector<Layer>& out) const;
  void flattenTies(const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) const;

  std::vector<Item> items_;
  std::vector<std::pair<std::string, std::string>> ties_;
};

}  // namespace strata
