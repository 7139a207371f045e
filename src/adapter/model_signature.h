// Checks that every rank built the same model (internal to the torch adapter).
#pragma once

#include <torch/nn/module.h>

#include "strata/group.h"

namespace strata::detail {

// "name dtype [d0, d1]" per parameter and buffer, one per line, in registration order.
std::string describeModel(const torch::nn::Module& module);

// Collective: throws strata::Error on every rank, naming the first difference from rank 0,
// when the ranks' descriptions differ.
void checkModelsMatch(Group& group, const std::string& description);

}  // namespace strata::detail
