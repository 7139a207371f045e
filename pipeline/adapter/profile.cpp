#include "pipeline/adapter/profile.h"

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>

#include "core/errors.h"
#include "core/seconds_since.h"
#include "pipeline/adapter/rng_state_guard.h"
#include "pipeline/layer_timing.h"

namespace strata::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

// c10's per-thread memory reporting (what torch's memory profiler uses): the bytes CPU
// tensors allocated on this thread while the counter is installed, minus those freed.
class LiveBytesCounter : public c10::MemoryReportingInfoBase {
 public:
  void reportMemoryUsage(void*, int64_t allocSize, int64_t, int64_t, c10::Device device) override {
    if (device.is_cpu()) live_ += allocSize;
  }
  bool memoryProfilingEnabled() const override { return true; }
  int64_t live() const { return live_; }

 private:
  int64_t live_ = 0;
};

// Puts back what profiling a built layer changes: its buffers and its parameters' gradients.
class LayerStateGuard {
 public:
  explicit LayerStateGuard(torch::nn::Module& module) {
    for (auto& b : module.buffers(true)) buffers_.push_back({b, b.detach().clone()});
    for (auto& p : module.parameters(true))
      grads_.push_back({p, p.grad().defined() ? p.grad().clone() : torch::Tensor()});
  }
  ~LayerStateGuard() {
    torch::NoGradGuard noGrad;
    for (auto& [b, saved] : buffers_) b.copy_(saved);
    for (auto& [p, saved] : grads_) {
      if (saved.defined())
        p.mutable_grad().copy_(saved);
      else if (p.grad().defined())
        p.mutable_grad() = torch::Tensor();
    }
  }

 private:
  std::vector<std::pair<torch::Tensor, torch::Tensor>> buffers_;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> grads_;
};

// A layer's failure, named, with what a layer must do.
[[noreturn]] void layerFailed(const std::string& name, size_t index, const torch::Tensor& x, const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  STRATA_THROW(Error, "pipeline: layer ", index, " (\"", name, "\") failed on a sample of shape ", x.sizes(), " ",
               x.scalar_type(), ": ", c10 ? c10->what_without_backtrace() : e.what(),
               " (every layer's forward takes one tensor and returns one tensor whose dimension 0 is the batch)");
}

// One layer of a chained run: its input (a leaf, needing a gradient unless it is the data
// entering layer 0 or not floating point) and its output, with the graph between them.
struct Link {
  torch::Tensor input;
  torch::Tensor output;
};

// The block's layers in order, as a stage runs them: a forward through every layer, then a
// backward through them in reverse, each layer's backward fed the gradient the layer after
// it computed for its input (ones for the block's last layer, or where none arrives). Timed
// per layer; the layers are measured together, not one at a time, because a layer's
// weights stay in the caches when it runs alone again and again, but not when the stage's
// other layers run in between: alone, a stage of several small layers (2-9 MB each) timed
// 5-7 % faster than the same layers run in turn (bench/RESULTS.md, session 8).
class ChainedRun {
 public:
  ChainedRun(std::vector<torch::nn::AnyModule>& modules, const std::vector<std::string>& names, int firstIndex)
      : modules_(modules), names_(names), first_(firstIndex) {}

  // Forward through every layer from `x`; seconds per layer. With `counters`, each layer's
  // forward reports its allocations to its counter (the stash).
  std::vector<double> forward(const torch::Tensor& x, std::vector<LiveBytesCounter>* counters) {
    links_.assign(modules_.size(), {});
    std::vector<double> seconds(modules_.size(), 0);
    torch::Tensor in = x;
    for (size_t k = 0; k < modules_.size(); ++k) {
      Link& l = links_[k];
      l.input = in.detach();
      if (index(k) != 0 && l.input.is_floating_point()) l.input.requires_grad_(true);
      try {
        const auto start = Clock::now();
        if (counters != nullptr) {
          c10::DebugInfoGuard watch(c10::DebugInfoKind::PROFILER_STATE,
                                    std::shared_ptr<c10::DebugInfoBase>(&(*counters)[k], [](c10::DebugInfoBase*) {}));
          l.output = modules_[k].forward<torch::Tensor>(l.input);
        } else {
          l.output = modules_[k].forward<torch::Tensor>(l.input);
        }
        seconds[k] = secondsSince(start);
      } catch (const std::exception& e) {
        layerFailed(names_.at(index(k)), index(k), l.input, e);
      }
      // Checked before the next layer runs on it, so the error names this layer.
      if (counters != nullptr) checkBatchMajor(names_.at(index(k)), index(k), l.output, l.input.size(0));
      in = l.output;
    }
    return seconds;
  }

  const torch::Tensor& output(size_t k) const { return links_.at(k).output; }

  // The backward of every layer, last first, as the executor runs it: the full backward, or
  // (`split`, zero_bubble) B, the input gradient when the input needs one, then W, the
  // layer's trainable parameters' gradients. Seconds per layer of the full backward, or of W
  // (0 for an output that needs no gradient or, split, a layer without trainable parameters).
  std::vector<double> backward(bool split) {
    std::vector<double> seconds(modules_.size(), 0);
    for (size_t k = modules_.size(); k-- > 0;) {
      Link& l = links_[k];
      if (!l.output.requires_grad()) {
        passed_ = torch::Tensor();
        continue;
      }
      const torch::Tensor grad = gradientFor(k);
      try {
        seconds[k] = split ? splitBackwardOf(k, grad) : fullBackwardOf(k, grad);
      } catch (const std::exception& e) {
        layerFailed(names_.at(index(k)), index(k), l.input, e);
      }
    }
    passed_ = torch::Tensor();
    links_.clear();
    return seconds;
  }

 private:
  size_t index(size_t k) const { return static_cast<size_t>(first_) + k; }

  double fullBackwardOf(size_t k, const torch::Tensor& grad) {
    Link& l = links_[k];
    const auto start = Clock::now();
    torch::autograd::backward({l.output}, {grad});
    const double seconds = secondsSince(start);
    passed_ = l.input.requires_grad() ? l.input.grad() : torch::Tensor();
    if (passed_.defined()) l.input.mutable_grad() = torch::Tensor();
    return seconds;
  }

  double splitBackwardOf(size_t k, const torch::Tensor& grad) {
    Link& l = links_[k];
    std::vector<torch::Tensor> params;
    for (const auto& p : modules_[k].ptr()->parameters(/*recurse=*/true))
      if (p.requires_grad()) params.push_back(p);
    torch::Tensor inputGrad;
    if (l.input.requires_grad())
      inputGrad = torch::autograd::grad({l.output}, {l.input}, {grad}, /*retain_graph=*/true, /*create_graph=*/false,
                                        /*allow_unused=*/true)[0];
    double seconds = 0;
    if (!params.empty()) {
      const auto start = Clock::now();
      torch::autograd::backward({l.output}, {grad}, /*retain_graph=*/false, /*create_graph=*/false, params);
      seconds = secondsSince(start);
    }
    passed_ = inputGrad;
    return seconds;
  }

  // What the layer after k passed back, when it fits k's output; ones otherwise.
  torch::Tensor gradientFor(size_t k) const {
    const torch::Tensor& out = links_[k].output;
    if (k + 1 < links_.size() && passed_.defined() && passed_.sizes() == out.sizes() &&
        passed_.scalar_type() == out.scalar_type())
      return passed_;
    return torch::ones_like(out);
  }

  std::vector<torch::nn::AnyModule>& modules_;
  const std::vector<std::string>& names_;
  int first_;
  std::vector<Link> links_;
  torch::Tensor passed_;  // the input gradient of the layer after the one being run
};

// Forward/backward medians, output, stash of every layer of a block run as a chain.
struct Measured {
  torch::Tensor output;
  double forwardSeconds = 0;
  double backwardSeconds = 0;
  double weightGradientSeconds = -1;
  int64_t stashBytes = 0;
};

std::vector<Measured> measureChained(std::vector<torch::nn::AnyModule>& modules, const std::vector<std::string>& names,
                                     int firstIndex, const torch::Tensor& x, const ProfileOptions& options) {
  std::vector<Measured> out(modules.size());
  std::vector<LayerTimingSamples> samples(modules.size());
  ChainedRun chain(modules, names, firstIndex);
  // Run 0 also measures the stash (the counters slow it): it is always a warm-up run.
  const int warmup = std::max(1, options.warmup);
  const int runs = options.samples > 0 ? warmup + options.samples : 1;
  for (int run = 0; run < runs; ++run) {
    std::vector<LiveBytesCounter> counters(run == 0 ? modules.size() : 0);
    const std::vector<double> forward = chain.forward(x, run == 0 ? &counters : nullptr);
    if (run == 0)
      for (size_t k = 0; k < modules.size(); ++k) {
        out[k].stashBytes = std::max<int64_t>(0, counters[k].live());
        out[k].output = chain.output(k).detach();
      }
    const std::vector<double> backward = chain.backward(/*split=*/false);
    std::vector<double> weight;
    if (options.splitBackward) {
      chain.forward(x, nullptr);
      weight = chain.backward(/*split=*/true);
    }
    for (size_t k = 0; k < modules.size(); ++k) {
      samples[k].forwardSeconds.push_back(forward[k]);
      samples[k].backwardSeconds.push_back(backward[k]);
      if (options.splitBackward) samples[k].weightGradientSeconds.push_back(weight[k]);
    }
  }
  if (options.samples > 0)
    for (size_t k = 0; k < modules.size(); ++k) {
      const LayerTimes t = layerTimesFromSamples(samples[k], warmup, names.at(static_cast<size_t>(firstIndex) + k));
      out[k].forwardSeconds = t.forwardSeconds;
      out[k].backwardSeconds = t.backwardSeconds;
      out[k].weightGradientSeconds = t.weightGradientSeconds;
    }
  return out;
}

size_t uniqueBytes(const std::vector<torch::Tensor>& tensors, bool gradOnly) {
  std::set<const void*> seen;
  size_t n = 0;
  for (const auto& t : tensors)
    if (seen.insert(t.unsafeGetTensorImpl()).second && (!gradOnly || t.requires_grad())) n += t.nbytes();
  return n;
}

std::string describe(const TieUse& u) {
  return c10::str(c10::IntArrayRef(u.sizes), " ", u.dtype, u.requiresGrad ? "" : " (frozen)");
}

void recordUses(const std::vector<TiedTensor>& ties, int layer, torch::nn::Module& module, const std::string& name,
                std::vector<TieUse>& uses) {
  for (size_t t = 0; t < ties.size(); ++t)
    for (size_t u = 0; u < ties[t].uses.size(); ++u) {
      if (ties[t].uses[u].first != layer) continue;
      const auto named = module.named_parameters(/*recurse=*/true);
      const torch::Tensor* p = named.find(ties[t].uses[u].second);
      if (p == nullptr)
        STRATA_THROW(ConfigError, "LayerList::tie: layer \"", name, "\" has no parameter \"", ties[t].uses[u].second,
                     "\" (its parameters: ", c10::Join(", ", named.keys()), ")");
      uses.push_back({static_cast<int>(t), static_cast<int>(u), p->sizes().vec(), p->scalar_type(),
                      p->requires_grad(), p->nbytes()});
    }
}

// Every use matches the first; each member layer's tiedBytes and a tie group per set of
// layers connected by ties.
void applyTies(const std::vector<TiedTensor>& ties, const std::vector<std::vector<TieUse>>& uses,
               const ProfileOptions& options, std::vector<LayerCost>& costs) {
  std::vector<size_t> parent(costs.size());  // union-find: layers connected by ties
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = i;
  const std::function<size_t(size_t)> find = [&](size_t i) { return parent[i] == i ? i : parent[i] = find(parent[i]); };
  std::vector<bool> tied(costs.size(), false);
  for (size_t t = 0; t < ties.size(); ++t) {
    const TieUse& first = uses[t][0];
    const auto path = [&](size_t u) {
      return costs[static_cast<size_t>(ties[t].uses[u].first)].name + "." + ties[t].uses[u].second;
    };
    for (size_t u = 1; u < uses[t].size(); ++u) {
      const TieUse& other = uses[t][u];
      STRATA_CHECK_WITH(ConfigError,
                        other.sizes == first.sizes && other.dtype == first.dtype &&
                            other.requiresGrad == first.requiresGrad,
                        "LayerList::tie: \"", path(0), "\" is ", describe(first), " but \"", path(u), "\" is ",
                        describe(other), "; tied parameters need the same shape and dtype");
    }
    const size_t grad = first.requiresGrad ? first.numBytes : 0;
    const size_t bytes = first.numBytes + grad + static_cast<size_t>(std::llround(options.optimizerStateFactor * grad));
    const std::vector<int> layers = ties[t].layers();
    for (int layer : layers) {
      const auto l = static_cast<size_t>(layer);
      costs[l].tiedBytes += bytes;
      tied[l] = true;
      parent[find(l)] = find(static_cast<size_t>(layers.front()));
    }
  }
  std::map<size_t, int> groupOfRoot;
  for (size_t i = 0; i < costs.size(); ++i)
    if (tied[i]) costs[i].tieGroup = groupOfRoot.emplace(find(i), static_cast<int>(groupOfRoot.size())).first->second;
}

}  // namespace

PartialProfile profileLayerRange(const std::vector<std::string>& names,
                                 const std::function<torch::nn::AnyModule(int)>& acquire,
                                 const std::vector<TiedTensor>& ties, const torch::Tensor& input, LayerRange range,
                                 const ProfileOptions& options) {
  RngStateGuard generator;
  PartialProfile out;
  out.range = range;
  std::vector<torch::nn::AnyModule> modules;
  std::vector<std::unique_ptr<LayerStateGuard>> states;
  for (int layer = range.begin; layer < range.end; ++layer) {
    const auto i = static_cast<size_t>(layer);
    modules.push_back(acquire(layer));
    torch::nn::Module& m = *modules.back().ptr();
    LayerCost c;
    c.name = names.at(i);
    const auto params = m.parameters(/*recurse=*/true);
    c.parameterBytes = uniqueBytes(params, false) + uniqueBytes(m.buffers(/*recurse=*/true), false);
    c.gradientBytes = uniqueBytes(params, true);
    c.optimizerStateBytes = static_cast<size_t>(std::llround(options.optimizerStateFactor * c.gradientBytes));
    recordUses(ties, layer, m, names[i], out.uses);
    out.costs.push_back(std::move(c));
    states.push_back(std::make_unique<LayerStateGuard>(m));
  }
  const std::vector<Measured> measured = measureChained(modules, names, range.begin, input, options);
  states.clear();  // buffers and gradients back as they were
  for (size_t k = 0; k < measured.size(); ++k) {
    LayerCost& c = out.costs[k];
    const Measured& r = measured[k];
    c.forwardSeconds = r.forwardSeconds;
    c.backwardSeconds = r.backwardSeconds;
    c.weightGradientSeconds = r.weightGradientSeconds;
    c.activationBytes = r.output.nbytes();
    c.stashBytes = options.activationCheckpointing ? c.activationBytes : static_cast<size_t>(r.stashBytes);
    out.shapes.push_back({r.output.sizes().vec(), r.output.scalar_type()});
  }
  return out;
}

torch::Tensor forwardLayers(const std::vector<std::string>& names,
                            const std::function<torch::nn::AnyModule(int)>& acquire, const torch::Tensor& input,
                            LayerRange range) {
  RngStateGuard generator;
  torch::NoGradGuard noGrad;
  torch::Tensor x = input;
  for (int layer = range.begin; layer < range.end; ++layer) {
    const auto i = static_cast<size_t>(layer);
    torch::nn::AnyModule module = acquire(layer);
    LayerStateGuard state(*module.ptr());
    try {
      torch::Tensor y = module.forward<torch::Tensor>(x);
      checkBatchMajor(names.at(i), i, y, x.size(0));
      x = y;
    } catch (const std::exception& e) {
      layerFailed(names.at(i), i, x, e);
    }
  }
  return x;
}

LayerProfile mergeProfiles(std::vector<PartialProfile> parts, size_t numLayers, const std::vector<TiedTensor>& ties,
                           const ProfileOptions& options) {
  std::sort(parts.begin(), parts.end(),
            [](const PartialProfile& a, const PartialProfile& b) { return a.range.begin < b.range.begin; });
  LayerProfile out;
  std::vector<std::vector<TieUse>> uses;
  for (const TiedTensor& t : ties) uses.emplace_back(t.uses.size());
  std::vector<std::vector<bool>> seen;
  for (const TiedTensor& t : ties) seen.emplace_back(t.uses.size(), false);
  for (PartialProfile& part : parts) {
    STRATA_CHECK(part.range.begin == static_cast<int>(out.costs.size()) &&
                     part.costs.size() == static_cast<size_t>(part.range.numLayers()) &&
                     part.shapes.size() == part.costs.size(),
                 "layer profile: a part for layers ", part.range.begin, "..", part.range.end - 1, " with ",
                 part.costs.size(), " costs follows ", out.costs.size(), " layers");
    for (auto& c : part.costs) out.costs.push_back(std::move(c));
    for (auto& s : part.shapes) out.shapes.push_back(std::move(s));
    for (TieUse& u : part.uses) {
      const auto t = static_cast<size_t>(u.tie), k = static_cast<size_t>(u.use);
      STRATA_CHECK(t < ties.size() && k < ties[t].uses.size(), "layer profile: tie use ", u.tie, "/", u.use,
                   " of ", ties.size(), " ties");
      seen[t][k] = true;
      uses[t][k] = std::move(u);
    }
  }
  STRATA_CHECK(out.costs.size() == numLayers, "layer profile: the parts cover ", out.costs.size(), " of ", numLayers,
               " layers");
  for (size_t t = 0; t < ties.size(); ++t)
    for (size_t k = 0; k < ties[t].uses.size(); ++k)
      STRATA_CHECK(seen[t][k], "layer profile: no part measured use ", k, " of tie ", t);
  applyTies(ties, uses, options, out.costs);
  return out;
}

namespace {

nlohmann::json shapesToJson(const std::vector<TensorShape>& shapes) {
  nlohmann::json out = nlohmann::json::array();
  for (const TensorShape& s : shapes) {
    nlohmann::json item = {static_cast<int>(s.dtype)};
    for (int64_t d : s.sizes) item.push_back(d);
    out.push_back(std::move(item));
  }
  return out;
}

std::vector<TensorShape> shapesFromJson(const nlohmann::json& json) {
  std::vector<TensorShape> out;
  for (const auto& item : json) {
    TensorShape s;
    s.dtype = static_cast<c10::ScalarType>(item.at(0).get<int>());
    for (size_t d = 1; d < item.size(); ++d) s.sizes.push_back(item.at(d).get<int64_t>());
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::string partialProfileToJson(const PartialProfile& part) {
  nlohmann::json uses = nlohmann::json::array();
  for (const TieUse& u : part.uses)
    uses.push_back({{"tie", u.tie}, {"use", u.use}, {"sizes", u.sizes}, {"dtype", static_cast<int>(u.dtype)},
                    {"requires_grad", u.requiresGrad}, {"bytes", u.numBytes}});
  return nlohmann::json{{"begin", part.range.begin}, {"end", part.range.end},
                        {"costs", layerProfileToJson(part.costs)}, {"shapes", shapesToJson(part.shapes)},
                        {"uses", uses}}
      .dump();
}

PartialProfile partialProfileFromJson(const std::string& text) {
  const nlohmann::json doc = nlohmann::json::parse(text);
  PartialProfile out;
  out.range = {doc.at("begin").get<int>(), doc.at("end").get<int>()};
  out.costs = layerProfileFromJson(doc.at("costs"), "gathered layer profile");
  out.shapes = shapesFromJson(doc.at("shapes"));
  for (const auto& u : doc.at("uses"))
    out.uses.push_back({u.at("tie").get<int>(), u.at("use").get<int>(), u.at("sizes").get<std::vector<int64_t>>(),
                        static_cast<c10::ScalarType>(u.at("dtype").get<int>()), u.at("requires_grad").get<bool>(),
                        u.at("bytes").get<size_t>()});
  return out;
}

LayerProfile profileLayers(const std::vector<std::string>& names,
                           const std::function<torch::nn::AnyModule(int)>& acquire,
                           const std::vector<TiedTensor>& ties, const torch::Tensor& sampleMicrobatch,
                           const ProfileOptions& options) {
  const LayerRange all{0, static_cast<int>(names.size())};
  return mergeProfiles({profileLayerRange(names, acquire, ties, sampleMicrobatch, all, options)}, names.size(), ties,
                       options);
}

std::string profileToJson(const LayerProfile& profile) {
  return nlohmann::json{{"costs", layerProfileToJson(profile.costs)}, {"shapes", shapesToJson(profile.shapes)}}.dump();
}

LayerProfile profileFromJson(const std::string& text) {
  const nlohmann::json doc = nlohmann::json::parse(text);
  LayerProfile out;
  out.costs = layerProfileFromJson(doc.at("costs"), "broadcast layer profile");
  out.shapes = shapesFromJson(doc.at("shapes"));
  return out;
}

}  // namespace strata::pipeline
