// What a libtorch optimizer keeps per parameter, for the pipeline's memory plan and its
// check after the first step.
#pragma once

#include <torch/optim/optimizer.h>

#include <cstddef>
#include <optional>

namespace strata::adapter {

// Optimizer state bytes per gradient byte, from the optimizer's type and options (the most
// of its parameter groups): SGD 0 (1 with momentum), Adam and AdamW 2 (3 with amsgrad),
// RMSprop 1 (+1 with momentum, +1 centered), Adagrad 1. nullopt for other optimizers.
std::optional<double> optimizerStateFactor(const torch::optim::Optimizer& optimizer);

// Bytes of the tensors the optimizer's state holds now (the optimizers above; others count 0).
size_t optimizerStateBytes(const torch::optim::Optimizer& optimizer);

}  // namespace strata::adapter
