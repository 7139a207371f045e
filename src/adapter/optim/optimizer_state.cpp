#include "adapter/optim/optimizer_state.h"

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <algorithm>

namespace strata::adapter {
namespace {

std::optional<double> factorOf(const torch::optim::OptimizerOptions& options) {
  if (const auto* o = dynamic_cast<const torch::optim::SGDOptions*>(&options)) return o->momentum() != 0 ? 1.0 : 0.0;
  if (const auto* o = dynamic_cast<const torch::optim::AdamOptions*>(&options)) return o->amsgrad() ? 3.0 : 2.0;
  if (const auto* o = dynamic_cast<const torch::optim::AdamWOptions*>(&options)) return o->amsgrad() ? 3.0 : 2.0;
  if (const auto* o = dynamic_cast<const torch::optim::RMSpropOptions*>(&options))
    return 1.0 + (o->momentum() > 0 ? 1 : 0) + (o->centered() ? 1 : 0);
  if (dynamic_cast<const torch::optim::AdagradOptions*>(&options)) return 1.0;
  return std::nullopt;
}

size_t bytesOf(const torch::Tensor& t) { return t.defined() ? t.nbytes() : 0; }

}  // namespace

std::optional<double> optimizerStateFactor(const torch::optim::Optimizer& optimizer) {
  std::optional<double> most;
  for (const auto& group : optimizer.param_groups()) {
    if (!group.has_options()) continue;
    const std::optional<double> f = factorOf(group.options());
    if (!f) return std::nullopt;
    most = std::max(most.value_or(0.0), *f);
  }
  return most;
}

size_t optimizerStateBytes(const torch::optim::Optimizer& optimizer) {
  size_t n = 0;
  for (const auto& item : optimizer.state()) {
    const torch::optim::OptimizerParamState* s = item.second.get();
    if (const auto* a = dynamic_cast<const torch::optim::AdamParamState*>(s))
      n += bytesOf(a->exp_avg()) + bytesOf(a->exp_avg_sq()) + bytesOf(a->max_exp_avg_sq());
    else if (const auto* w = dynamic_cast<const torch::optim::AdamWParamState*>(s))
      n += bytesOf(w->exp_avg()) + bytesOf(w->exp_avg_sq()) + bytesOf(w->max_exp_avg_sq());
    else if (const auto* g = dynamic_cast<const torch::optim::SGDParamState*>(s))
      n += bytesOf(g->momentum_buffer());
    else if (const auto* r = dynamic_cast<const torch::optim::RMSpropParamState*>(s))
      n += bytesOf(r->square_avg()) + bytesOf(r->momentum_buffer()) + bytesOf(r->grad_avg());
    else if (const auto* d = dynamic_cast<const torch::optim::AdagradParamState*>(s))
      n += bytesOf(d->sum());
  }
  return n;
}

}  // namespace strata::adapter
