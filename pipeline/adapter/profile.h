// Per-layer profiling on a sample microbatch: the planner's LayerCost for every layer.
//
// Each layer runs forward and backward `repeats` times on the previous layer's (detached)
// output; the fastest run counts (the least disturbed by other processes). Bytes come from
// the tensors: parameters, gradients (parameters that require grad), optimizer state
// (2 x gradients: Adam's two moments; SGD with momentum needs 1 x, plain SGD 0), the output
// activation (what crosses a cut) and the stash (the output again: the autograd graph keeps
// about one activation per layer). The model's buffers, gradients and the default CPU
// generator are restored afterwards, so profiling leaves no trace on training.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <vector>

#include "pipeline/layer_cost.h"
#include "pipeline/adapter/layers.h"

namespace strata::pipeline {

std::vector<LayerCost> profileLayers(const std::vector<Layer>& layers, torch::nn::Module& model,
                                     const torch::Tensor& sampleMicrobatch, int repeats = 3);

}  // namespace strata::pipeline
