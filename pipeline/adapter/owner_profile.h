// The start-up profile of a pipeline, measured by the ranks that will own the layers.
//
//   1. provisionalSplit (pure) gives every pipeline rank a contiguous block of layers;
//   2. each rank builds its block (a LayerList's layers, or takes them from the whole model);
//   3. the sample microbatch travels down the pipeline once without autograd, so every rank
//      has its block's real input (one forward of the model in all: cheap beside the profile);
//   4. every rank profiles its block at the same moment (a run's contention: all ranks compute
//      at once, sharing cores, caches and memory bandwidth);
//   5. the parts are allgathered over the world and merged on every rank alike.
//
// Data-parallel replicas: every replica profiles (so the profile sees the whole job busy),
// and every rank plans from the first pipeline's parts (world rank 0's pipeline), so all
// replicas cut the model identically. A failure on any rank (a factory, a layer's forward, a
// tie naming a parameter that does not exist) throws on every rank with that rank's error;
// every wait is a collective or receive with the group's timeout, so nothing hangs.
#pragma once

#include <torch/nn/modules/container/any.h>
#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "pipeline/adapter/profile.h"
#include "pipeline/provisional_split.h"
#include "strata/group.h"

namespace strata::pipeline {

struct OwnerProfileSetup {
  std::vector<std::string> names;  // every layer's path
  std::vector<TiedTensor> ties;
  // Layer i of this rank's block: built for the occasion (a LayerList) or the model's own.
  std::function<torch::nn::AnyModule(int)> acquire;
  LayerRange block;                  // this rank's provisional block
  Group* pipelineGroup = nullptr;    // null with one partition
  int ppRank = 0;
  int partitions = 1;
  std::vector<int> firstPipelineWorldRanks;  // world ranks of pipeline 0, by pipeline rank
};

// Collective over the world (and point-to-point over the pipeline group). Every rank returns
// the same profile of every layer.
LayerProfile profileOnOwners(const OwnerProfileSetup& setup, const torch::Tensor& sampleMicrobatch, Group& world,
                             const ProfileOptions& options);

// Collective over `group`: every rank's `text`, in rank order.
std::vector<std::string> allgatherStrings(Group& group, const std::string& text);

}  // namespace strata::pipeline
