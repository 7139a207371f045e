// What a pipeline rank holds against what the plan predicted: parameters (and buffers),
// gradients and optimizer state, gathered after the first optimizer step and logged on world
// rank 0 beside the plan.
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "strata/group.h"

namespace strata::adapter {

struct HeldBytes {
  int64_t parameters = 0;  // and buffers
  int64_t gradients = 0;
  int64_t optimizerState = 0;
  int64_t total() const { return parameters + gradients + optimizerState; }
};

// `parameters` and `buffers` are this rank's (a tied tensor once); optimizer may be null.
HeldBytes heldBytes(const std::vector<std::pair<std::string, torch::Tensor>>& parameters,
                    const std::vector<std::pair<std::string, torch::Tensor>>& buffers,
                    const torch::optim::Optimizer* optimizer);

// Collective over `world`: every rank's prediction and holdings; world rank 0 logs the table
// (INFO, subsystem PIPE) and a warning naming the ranks that hold more than predicted.
void logHeldBytes(Group& world, int64_t predicted, const HeldBytes& held, double optimizerStateFactor);

}  // namespace strata::adapter
