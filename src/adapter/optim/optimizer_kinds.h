// The per-parameter state of libtorch's element-wise optimizers (SGD, Adam, AdamW, Adagrad,
// RMSprop) as plain fields: a few tensors shaped like the parameter, and a step count. Lets
// host-shared parameters (host_shared_state.h) keep that state in shared memory and build an
// optimizer over whole parameters from it for checkpoints. Internal to the adapter.
#pragma once

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace strata::adapter {

// One of the five optimizers, exactly (a subclass may step differently): its update is
// element-wise, so stepping pieces of a tensor is the same arithmetic as stepping the tensor.
bool isElementwiseOptimizer(const torch::optim::Optimizer& optimizer);

// Tensor fields of a state of `optimizer`'s type (undefined ones included): SGD 1 (momentum
// buffer), Adam / AdamW 3 (exp_avg, exp_avg_sq, max_exp_avg_sq), Adagrad 1 (sum), RMSprop 3
// (square_avg, momentum_buffer, grad_avg). Requires isElementwiseOptimizer.
int numStateTensors(const torch::optim::Optimizer& optimizer);
std::vector<torch::Tensor> stateTensors(const torch::optim::Optimizer& optimizer,
                                        const torch::optim::OptimizerParamState& state);
// Which of those tensors the optimizer's options can create (any group): SGD's momentum
// buffer only with momentum, Adam's max_exp_avg_sq only with amsgrad, RMSprop's momentum
// buffer and grad_avg only with momentum / centered.
std::vector<bool> possibleStateTensors(const torch::optim::Optimizer& optimizer);
// The step count (SGD has none: 0).
int64_t stateStep(const torch::optim::Optimizer& optimizer, const torch::optim::OptimizerParamState& state);
// A state of `optimizer`'s type holding `tensors` (as stateTensors orders them) and `step`.
std::unique_ptr<torch::optim::OptimizerParamState> makeState(const torch::optim::Optimizer& optimizer,
                                                             const std::vector<torch::Tensor>& tensors, int64_t step);
// An optimizer of `like`'s type with `groups` (each with its options) and no state.
std::unique_ptr<torch::optim::Optimizer> makeOptimizerLike(const torch::optim::Optimizer& like,
                                                           std::vector<torch::optim::OptimizerParamGroup> groups);

}  // namespace strata::adapter
