// Tied tensors whose uses sit on different pipeline stages (the protocol is in
// pipeline/ties.h): every holding rank keeps a copy; per microbatch the other holding
// stages hand their gradient contribution to the owner stage, which adds them to its own
// right before autograd accumulates it; after the step the owner's gradient (reduced over
// data-parallel replicas) is broadcast to every holder, so the copies take identical
// optimizer steps. Uses on one rank share one tensor and one gradient accumulator
// (shareTiedTensors), so a rank holds each tied tensor once.
//
// The hook sits before the tensor's AccumulateGrad: during a backward of a contributing
// stage it takes the incoming gradient out (nothing accumulates); during the owner stage's
// backward it returns contributions (last stage first) + its own.
//
// Messages: one group per tie over its holding ranks (created in tie order, collective over
// those ranks), so contributions never share a channel with activations; every rank sends
// its contributions in the order the owner consumes them (TieContribution), every receive
// is bounded by the group's timeout.
//
// Threading: the training thread (autograd runs CPU backward on the calling thread).
#pragma once

#include <torch/types.h>

#include <memory>
#include <vector>

#include "pipeline/adapter/layers.h"
#include "pipeline/ties.h"
#include "strata/group.h"

namespace strata::pipeline {

struct TiedGradientsSetup {
  std::vector<TiedTensor> ties;     // all of the model's (uses[0]: the value source)
  std::vector<int> stageOfLayer;    // the partition
  int partitions = 1;
  int ppRank = 0;
  std::vector<int> chunkStage;      // this rank's chunk -> global stage
  const std::vector<Layer>* layers = nullptr;  // this rank's layers are built
  std::vector<int> worldRankOfPpRank;  // this pipeline's world ranks, index = pipeline rank
  // Copies start from the value source's value (each built its own), broadcast here.
  bool broadcastInitialValues = false;
};

class TiedGradients {
 public:
  // Collective over each tie's holding ranks (group creation, initial values).
  explicit TiedGradients(TiedGradientsSetup setup);
  ~TiedGradients();
  TiedGradients(const TiedGradients&) = delete;
  TiedGradients& operator=(const TiedGradients&) = delete;

  // Ties whose uses span stages (nothing to do when empty).
  bool empty() const { return ties_.empty(); }

  void beginStep(int microbatches);
  // Around every backward of the executor: the owner receives the contributions of this
  // microbatch before its backward; the others send theirs after.
  void beforeBackward(int chunk, int microbatch);
  void afterBackward(int chunk, int microbatch);
  // After the program (and the data-parallel reduction): waits for this rank's sends and
  // broadcasts the owner's gradient to every holder.
  void finishStep();

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::vector<int> ties_;  // indices of the ties that span stages and that this rank holds
};

}  // namespace strata::pipeline
