#include "pipeline/adapter/model_builder.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/types.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "core/errors.h"
#include "strata/nested_sequential.h"

namespace strata::pipeline {
namespace {

std::string messageOf(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

// Union-find over parameter uses: the connected declarations form one tied tensor.
struct UseSets {
  std::map<std::pair<int, std::string>, std::pair<int, std::string>> parent;
  std::pair<int, std::string> find(const std::pair<int, std::string>& x) {
    auto it = parent.find(x);
    if (it == parent.end()) return parent[x] = x;
    if (it->second == x) return x;
    return it->second = find(it->second);
  }
};

}  // namespace

ModelBuilder::ModelBuilder(const LayerList& list, uint64_t modelSeed)
    : list_(list), layers_(list.layers()), modelSeed_(modelSeed) {
  STRATA_CHECK_WITH(ConfigError, !layers_.empty(), "LayerList: the model has no layers");
  // Declarations in order; the first declaration of a component gives its value source.
  UseSets sets;
  std::vector<std::pair<std::pair<int, std::string>, std::pair<int, std::string>>> declared;
  for (const auto& [first, second] : list.ties()) {
    declared.emplace_back(resolve(first), resolve(second));
    const auto a = sets.find(declared.back().first), b = sets.find(declared.back().second);
    if (a != b) sets.parent[b] = a;
  }
  std::map<std::pair<int, std::string>, size_t> tieOfRoot;
  for (const auto& [first, second] : declared) {
    const auto root = sets.find(first);
    auto [it, inserted] = tieOfRoot.emplace(root, ties_.size());
    if (inserted) ties_.push_back({{first}});
    for (const auto& use : {first, second}) {
      auto& uses = ties_[it->second].uses;
      if (std::find(uses.begin(), uses.end(), use) == uses.end()) uses.push_back(use);
    }
  }
  for (TiedTensor& t : ties_) std::sort(t.uses.begin() + 1, t.uses.end());
}

std::pair<int, std::string> ModelBuilder::resolve(const std::string& parameterPath) const {
  int best = -1;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::string& p = layers_[i].path;
    if (parameterPath.size() > p.size() + 1 && parameterPath.compare(0, p.size(), p) == 0 &&
        parameterPath[p.size()] == '.' && (best < 0 || p.size() > layers_[static_cast<size_t>(best)].path.size()))
      best = static_cast<int>(i);
  }
  if (best < 0) {
    std::vector<std::string> paths;
    for (const auto& l : layers_) paths.push_back(l.path);
    STRATA_THROW(ConfigError, "LayerList::tie: \"", parameterPath, "\" is not a parameter of any layer (layers: ",
                 c10::Join(", ", paths), "); give \"<layer path>.<parameter name>\"");
  }
  return {best, parameterPath.substr(layers_[static_cast<size_t>(best)].path.size() + 1)};
}

torch::nn::AnyModule ModelBuilder::build(int layer) const {
  const LayerList::Layer& l = layers_.at(static_cast<size_t>(layer));
  auto generator = at::detail::getDefaultCPUGenerator();
  torch::Tensor saved;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    saved = generator.get_state();
    generator.set_current_seed(initSeed(modelSeed_, l.path));
  }
  auto restore = [&] {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(saved);
  };
  torch::nn::AnyModule module;
  try {
    module = l.factory();
  } catch (const std::exception& e) {
    restore();
    STRATA_THROW(Error, "LayerList: the factory of layer \"", l.path, "\" (layer ", layer, ") threw: ", messageOf(e));
  }
  restore();
  STRATA_CHECK(!module.is_empty(), "LayerList: the factory of layer \"", l.path, "\" returned no module");
  return module;
}

torch::nn::Sequential ModelBuilder::assemble(const std::vector<torch::nn::AnyModule>& built) const {
  STRATA_CHECK(built.size() == layers_.size(), "ModelBuilder::assemble: ", built.size(), " modules for ",
               layers_.size(), " layers");
  size_t next = 0;
  return assembleList(list_, built, next);
}

torch::nn::Sequential ModelBuilder::assembleList(const LayerList& list, const std::vector<torch::nn::AnyModule>& built,
                                                 size_t& next) const {
  torch::nn::Sequential out;
  for (const LayerList::Item& item : list.items_) {
    if (item.group) {
      const torch::nn::Sequential items = assembleList(*item.group, built, next);
      if (items->is_empty()) continue;
      strata::NestedSequential group;  // a plain Sequential cannot be nested
      const auto names = items->named_children();
      size_t i = 0;
      for (const torch::nn::AnyModule& m : *items) group->push_back(names[i++].key(), m);
      out->push_back(item.name, torch::nn::AnyModule(group.ptr()));
    } else {
      const torch::nn::AnyModule& m = built[next++];
      if (!m.is_empty()) out->push_back(item.name, m);
    }
  }
  return out;
}

torch::Tensor tiedParameter(const std::vector<Layer>& layers, const std::pair<int, std::string>& use) {
  const Layer& layer = layers.at(static_cast<size_t>(use.first));
  STRATA_CHECK(!layer.module.is_empty(), "tied parameter of layer ", layer.name, ": the layer is not built here");
  const auto named = layer.module.ptr()->named_parameters(/*recurse=*/true);
  if (const torch::Tensor* t = named.find(use.second)) return *t;
  STRATA_THROW(ConfigError, "LayerList::tie: layer \"", layer.name, "\" has no parameter \"", use.second,
               "\" (its parameters: ", c10::Join(", ", named.keys()), ")");
}

std::vector<std::shared_ptr<void>> shareTiedTensors(const std::vector<Layer>& layers,
                                                    const std::vector<TiedTensor>& ties) {
  std::vector<std::shared_ptr<void>> handles;
  for (const TiedTensor& tie : ties) {
    std::vector<std::pair<int, std::string>> held;
    for (const auto& use : tie.uses)
      if (!layers.at(static_cast<size_t>(use.first)).module.is_empty()) held.push_back(use);
    if (held.size() < 2) continue;
    const torch::Tensor first = tiedParameter(layers, held[0]);
    const std::string firstPath = layers[static_cast<size_t>(held[0].first)].name + "." + held[0].second;
    std::shared_ptr<torch::autograd::Node> accumulator;
    if (first.requires_grad()) accumulator = torch::autograd::impl::grad_accumulator(first);
    for (size_t i = 1; i < held.size(); ++i) {
      torch::Tensor other = tiedParameter(layers, held[i]);
      const std::string path = layers[static_cast<size_t>(held[i].first)].name + "." + held[i].second;
      STRATA_CHECK_WITH(ConfigError,
                        other.sizes() == first.sizes() && other.scalar_type() == first.scalar_type() &&
                            other.requires_grad() == first.requires_grad(),
                        "LayerList::tie: \"", firstPath, "\" is ", first.sizes(), " ", first.scalar_type(),
                        (first.requires_grad() ? "" : " (frozen)"), " but \"", path, "\" is ", other.sizes(), " ",
                        other.scalar_type(), (other.requires_grad() ? "" : " (frozen)"),
                        "; tied parameters need the same shape and dtype");
      if (other.unsafeGetTensorImpl() == first.unsafeGetTensorImpl()) continue;
      {
        torch::NoGradGuard noGrad;
        other.set_data(first);  // one storage
      }
      if (accumulator) torch::autograd::impl::set_grad_accumulator(other, accumulator);  // one gradient
    }
    if (accumulator) handles.push_back(accumulator);
  }
  return handles;
}

}  // namespace strata::pipeline
