#include "adapter/optim/optimizer_kinds.h"

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <typeinfo>

#include "core/errors.h"

namespace strata::adapter {
namespace {

namespace optim = torch::optim;

template <typename Opt>
bool isType(const optim::Optimizer& o) {
  return typeid(o) == typeid(Opt);
}

template <typename State>
const State& stateAs(const optim::OptimizerParamState& s) {
  return static_cast<const State&>(s);
}

template <typename Opt, typename Options>
std::unique_ptr<optim::Optimizer> emptyOptimizerLike(const optim::Optimizer& like, std::vector<optim::OptimizerParamGroup> groups) {
  // Built without parameters and then given the groups: Adagrad's constructor would allocate
  // a state for every parameter it is built with.
  auto out = std::make_unique<Opt>(std::vector<optim::OptimizerParamGroup>{}, static_cast<const Options&>(like.defaults()));
  for (auto& g : groups) out->add_param_group(g);
  return out;
}

}  // namespace

bool isElementwiseOptimizer(const optim::Optimizer& o) {
  return isType<optim::SGD>(o) || isType<optim::Adam>(o) || isType<optim::AdamW>(o) || isType<optim::Adagrad>(o) ||
         isType<optim::RMSprop>(o);
}

int numStateTensors(const optim::Optimizer& o) {
  if (isType<optim::SGD>(o) || isType<optim::Adagrad>(o)) return 1;
  STRATA_CHECK(isElementwiseOptimizer(o), "numStateTensors: unsupported optimizer");
  return 3;
}

std::vector<torch::Tensor> stateTensors(const optim::Optimizer& o, const optim::OptimizerParamState& s) {
  if (isType<optim::SGD>(o)) return {stateAs<optim::SGDParamState>(s).momentum_buffer()};
  if (isType<optim::Adam>(o)) {
    const auto& a = stateAs<optim::AdamParamState>(s);
    return {a.exp_avg(), a.exp_avg_sq(), a.max_exp_avg_sq()};
  }
  if (isType<optim::AdamW>(o)) {
    const auto& a = stateAs<optim::AdamWParamState>(s);
    return {a.exp_avg(), a.exp_avg_sq(), a.max_exp_avg_sq()};
  }
  if (isType<optim::Adagrad>(o)) return {stateAs<optim::AdagradParamState>(s).sum()};
  STRATA_CHECK(isType<optim::RMSprop>(o), "stateTensors: unsupported optimizer");
  const auto& r = stateAs<optim::RMSpropParamState>(s);
  return {r.square_avg(), r.momentum_buffer(), r.grad_avg()};
}

namespace {
// Whether any group's options (of type Options) satisfy `test`.
template <typename Options, typename Test>
bool anyGroup(const optim::Optimizer& o, Test test) {
  for (const auto& g : o.param_groups())
    if (test(static_cast<const Options&>(g.options()))) return true;
  return test(static_cast<const Options&>(o.defaults()));
}
}  // namespace

std::vector<bool> possibleStateTensors(const optim::Optimizer& o) {
  if (isType<optim::SGD>(o)) return {anyGroup<optim::SGDOptions>(o, [](const auto& x) { return x.momentum() != 0; })};
  if (isType<optim::Adam>(o)) return {true, true, anyGroup<optim::AdamOptions>(o, [](const auto& x) { return x.amsgrad(); })};
  if (isType<optim::AdamW>(o))
    return {true, true, anyGroup<optim::AdamWOptions>(o, [](const auto& x) { return x.amsgrad(); })};
  if (isType<optim::Adagrad>(o)) return {true};
  STRATA_CHECK(isType<optim::RMSprop>(o), "possibleStateTensors: unsupported optimizer");
  return {true, anyGroup<optim::RMSpropOptions>(o, [](const auto& x) { return x.momentum() > 0; }),
          anyGroup<optim::RMSpropOptions>(o, [](const auto& x) { return x.centered(); })};
}

int64_t stateStep(const optim::Optimizer& o, const optim::OptimizerParamState& s) {
  if (isType<optim::Adam>(o)) return stateAs<optim::AdamParamState>(s).step();
  if (isType<optim::AdamW>(o)) return stateAs<optim::AdamWParamState>(s).step();
  if (isType<optim::Adagrad>(o)) return stateAs<optim::AdagradParamState>(s).step();
  if (isType<optim::RMSprop>(o)) return stateAs<optim::RMSpropParamState>(s).step();
  return 0;
}

std::unique_ptr<optim::OptimizerParamState> makeState(const optim::Optimizer& o, const std::vector<torch::Tensor>& t,
                                                      int64_t step) {
  STRATA_CHECK(static_cast<int>(t.size()) == numStateTensors(o), "makeState: ", t.size(), " tensors for ",
               numStateTensors(o));
  if (isType<optim::SGD>(o)) {
    auto s = std::make_unique<optim::SGDParamState>();
    s->momentum_buffer(t[0]);
    return s;
  }
  if (isType<optim::Adam>(o)) {
    auto s = std::make_unique<optim::AdamParamState>();
    s->step(step).exp_avg(t[0]).exp_avg_sq(t[1]).max_exp_avg_sq(t[2]);
    return s;
  }
  if (isType<optim::AdamW>(o)) {
    auto s = std::make_unique<optim::AdamWParamState>();
    s->step(step).exp_avg(t[0]).exp_avg_sq(t[1]).max_exp_avg_sq(t[2]);
    return s;
  }
  if (isType<optim::Adagrad>(o)) {
    auto s = std::make_unique<optim::AdagradParamState>();
    s->sum(t[0]).step(step);
    return s;
  }
  auto s = std::make_unique<optim::RMSpropParamState>();
  s->step(step).square_avg(t[0]).momentum_buffer(t[1]).grad_avg(t[2]);
  return s;
}

std::unique_ptr<optim::Optimizer> makeOptimizerLike(const optim::Optimizer& like,
                                                    std::vector<optim::OptimizerParamGroup> groups) {
  if (isType<optim::SGD>(like)) return emptyOptimizerLike<optim::SGD, optim::SGDOptions>(like, std::move(groups));
  if (isType<optim::Adam>(like)) return emptyOptimizerLike<optim::Adam, optim::AdamOptions>(like, std::move(groups));
  if (isType<optim::AdamW>(like)) return emptyOptimizerLike<optim::AdamW, optim::AdamWOptions>(like, std::move(groups));
  if (isType<optim::Adagrad>(like)) return emptyOptimizerLike<optim::Adagrad, optim::AdagradOptions>(like, std::move(groups));
  STRATA_CHECK(isType<optim::RMSprop>(like), "makeOptimizerLike: unsupported optimizer");
  return emptyOptimizerLike<optim::RMSprop, optim::RMSpropOptions>(like, std::move(groups));
}

}  // namespace strata::adapter
