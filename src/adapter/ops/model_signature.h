// Checks that every rank built the same model and was given the same model-parallel
// settings (internal to the torch adapter).
#pragma once

#include <torch/nn/module.h>

#include "config/config.h"
#include "strata/group.h"

namespace strata::detail {

// "name dtype [d0, d1]" per parameter and buffer, one per line, in registration order.
std::string describeModel(const torch::nn::Module& module);

// Collective: throws strata::Error on every rank, naming the first difference from rank 0,
// when the ranks' descriptions differ.
void checkModelsMatch(Group& group, const std::string& description);

// "key: value" per line, sorted by key: every "modelparallel" setting the ranks must share.
std::string describeModelParallel(const config::ModelParallelConfig& mp);

// Collective over `group` (run before any other collective of the pipeline, so ranks given
// different settings cannot wait on each other): throws strata::ConfigError on every rank,
// naming the ranks that differ from rank 0 and the first differing setting, when the ranks'
// descriptions differ.
void checkModelParallelConfigsMatch(Group& group, const std::string& description);

}  // namespace strata::detail
