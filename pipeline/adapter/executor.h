// The pipeline executor: the interpreter of one rank's program (pipeline/program.h) for one
// training step. It decides nothing: the order of forwards, backwards, sends and receives is
// the program's, proven deadlock-free by the simulator. It computes nothing either: forward,
// backward (B and W) and the stash are the Stage's (stage.h). The executor only
//   * calls the stage for kForward, kBackward and kBackwardWeight,
//   * sends the stage's boundary tensors with isend (eager: the buffers are kept alive until
//     the step ends, when every send is waited for) and receives them with irecv + wait into
//     tensors of the stage's boundary shapes (the group's collective timeout bounds every
//     wait); a boundary of several tensors is sent as that many messages, in order, under
//     one tag,
//   * calls back for the data-parallel gradient reduction (kReduceGradients).
//
// Observing (src/adapter/observe/observers.h): while an observer times in detail (the
// profiler's framework_profile window), every send and every receive (the time blocked in it)
// is reported as a transfer, and the final wait for the step's sends; the stage reports its
// own compute. The profiler turns them into "Pipeline" slices on the pipeline track.
//
// Threading: one training thread.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "pipeline/adapter/stage.h"
#include "pipeline/program.h"
#include "strata/group.h"

namespace strata::pipeline {

struct ExecutorSetup {
  int rank = 0;                    // pipeline rank
  int partitions = 1;              // p
  Group* pipelineGroup = nullptr;  // ranks of this pipeline, index = pipeline rank
};

class Executor {
 public:
  // `stage` outlives the executor.
  Executor(Stage& stage, ExecutorSetup setup);

  // Carries out `program` (this rank's) for one step. Throws strata::Error naming the
  // instruction (and the whole program) when it fails.
  StepReport run(const Program& program, const StepInputs& inputs);

 private:
  void execute(const Instruction& in);
  void send(const Instruction& in, Boundary values);
  Boundary recv(const Instruction& in, const BoundaryShapes& shapes);
  void finishSends();
  void reportTransfer(const Instruction& in, int64_t startUs, int64_t bytes);

  Stage& stage_;
  ExecutorSetup setup_;
  bool timing_ = false;  // an observer times this step in detail (per layer, transfers)
  const StepInputs* in_ = nullptr;
  StepReport report_;
  struct PendingSend {
    std::shared_ptr<Work> work;
    torch::Tensor buffer;
  };
  std::vector<PendingSend> sends_;
  std::map<uint64_t, Boundary> local_;  // sends to this same rank (p == 1, virtual stages)
};

}  // namespace strata::pipeline
