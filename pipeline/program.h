// Pipeline programs: the contract between the pure planning half of pipeline/ (schedules,
// simulator) and the executor (the only part that touches modules and tensors).
//
// A schedule is data: for every pipeline rank an ordered list of instructions. The executor
// carries them out one by one and decides nothing; the simulator runs all ranks' programs
// against each other to prove that every receive meets its send (no deadlock) and to predict
// step time, bubble and in-flight activations.
//
// Stages. With p pipeline ranks and v virtual stages per rank (Megatron-style chunks; v = 1
// without them) the model is cut into p*v contiguous stages; global stage s = chunk*p + rank
// lives on pipeline rank s % p as that rank's chunk s / p. Activations flow from stage s to
// s+1 and gradients from s+1 back to s.
//
// Communication semantics the programs assume (and the executor must provide): sends are
// eager (they never wait for the receiver; the executor uses isend and keeps the buffer alive
// until the step ends); receives block until their message arrives; messages between two
// ranks arrive in the order they were sent, and each carries a tag (messageTag) that the
// receiver checks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::pipeline {

enum class Op : uint8_t {
  kLoadMicrobatch,   // first stage: take microbatch `microbatch` of the input (last: of the target)
  kForward,          // run chunk `chunk` forward on microbatch `microbatch`; stash what backward needs
  kBackward,         // backward of chunk `chunk` for `microbatch`; frees its stash. When the
                     // program also has its kBackwardWeight (zero_bubble), only the gradient
                     // w.r.t. the chunk's input (B); the stash lives on until the W.
  kBackwardWeight,   // zero_bubble's W: gradients w.r.t. the chunk's parameters for `microbatch`,
                     // after its kBackward; accumulates them and frees the stash
  kSendActivation,   // output of (chunk, microbatch) to `peer`
  kRecvActivation,   // input of (chunk, microbatch) from `peer`
  kSendGradient,     // gradient w.r.t. the input of (chunk, microbatch) to `peer`
  kRecvGradient,     // gradient w.r.t. the output of (chunk, microbatch) from `peer`
  kReduceGradients,  // data-parallel reduction of this rank's gradients (hybrid), once per step
  kOptimizerStep,    // step this rank's local parameters, once per step
};

const char* opName(Op op);

struct Instruction {
  Op op;
  int microbatch = -1;  // -1 for kReduceGradients / kOptimizerStep
  int chunk = 0;        // local chunk index (0 .. v-1); the global stage is chunk*p + rank
  int peer = -1;        // pipeline rank of the other side, for sends and receives
  bool operator==(const Instruction& o) const {
    return op == o.op && microbatch == o.microbatch && chunk == o.chunk && peer == o.peer;
  }
};

struct Program {
  int rank = 0;  // pipeline rank
  std::vector<Instruction> instructions;
};

// The tag a send and its receive both carry: which kind of message, for which microbatch
// and global stage boundary. A mismatch means the programs disagree (a bug, reported).
// The boundary between stages s and s+1 is numbered s+1 for both directions;
// instructionTag() in schedule.h computes the tag of a send or receive instruction.
uint64_t messageTag(bool gradient, int microbatch, int globalStage);

}  // namespace strata::pipeline
