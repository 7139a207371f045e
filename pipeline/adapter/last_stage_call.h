// The user's step function running for one microbatch on the last pipeline stage.
//
// Lifetime: the stage creates one LastStageCall on its stack when its forward reaches the
// last global stage, passes it to StepInputs::lastStage (which runs the step function), and
// reads the recorded loss when the function has returned; the object dies with that forward.
// While it lives, PipelineModel points at it (PipelineModel::Scope), so inside the function
// m(x) is this chunk's forward for this microbatch (forward) and m.backward(loss) records the
// loss that the schedule's backward runs later (backward). Outside it m(x) is an evaluation
// forward through the whole pipeline.
//
// Threading: the training thread only.
#pragma once

#include <torch/types.h>

#include "pipeline/adapter/stage.h"

namespace strata::pipeline {

class LastStageCall {
 public:
  LastStageCall(Stage& stage, int chunk, int microbatch) : stage_(stage), chunk_(chunk), microbatch_(microbatch) {}
  LastStageCall(const LastStageCall&) = delete;
  LastStageCall& operator=(const LastStageCall&) = delete;

  // m(x): the chunk's forward, seeded for this microbatch.
  torch::Tensor forward(const torch::Tensor& x) { return stage_.forwardChunk(chunk_, microbatch_, x); }
  // m.backward(loss): kept for the schedule's backward (the last call wins).
  void backward(const torch::Tensor& loss) { loss_ = loss; }
  // What backward() was given (undefined when the function did not call it).
  const torch::Tensor& loss() const { return loss_; }
  int microbatch() const { return microbatch_; }

 private:
  Stage& stage_;
  const int chunk_;
  const int microbatch_;
  torch::Tensor loss_;
};

}  // namespace strata::pipeline
