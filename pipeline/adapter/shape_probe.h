// Every layer's output shape for a new input shape, found without any rank running layers it
// does not hold: stage by stage in order, the stage's rank runs its layers (evaluation mode,
// no autograd, on zeros of the incoming shape; stage 0 on the input itself) and sends the
// output's shape to the next stage's rank; the last layer's shape is then broadcast to the
// whole pipeline (an evaluation forward returns it everywhere). A rank learns the shapes of
// the layers it runs, of its stages' inputs and of the last layer; the executor needs no
// others. Collective over the pipeline group; every wait is bounded by its timeout.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <vector>

#include "pipeline/adapter/stage.h"
#include "pipeline/adapter/layers.h"
#include "strata/group.h"

namespace strata::pipeline {

struct ShapeProbe {
  const std::vector<Layer>* layers = nullptr;  // this rank's are built
  torch::nn::Module* model = nullptr;          // its training flag is restored
  std::vector<ChunkRange> chunks;              // this rank's
  Group* pipelineGroup = nullptr;              // null when partitions == 1
  int rank = 0;                                // pipeline rank
  int partitions = 1;

  // Shapes by layer (unknown ones empty). Throws naming the layer when an output is not
  // batch-major.
  std::vector<TensorShape> run(const torch::Tensor& input) const;
};

}  // namespace strata::pipeline
