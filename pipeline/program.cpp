#include "pipeline/program.h"

namespace strata::pipeline {

const char* opName(Op op) {
  switch (op) {
    case Op::kLoadMicrobatch: return "load";
    case Op::kForward: return "forward";
    case Op::kBackward: return "backward";
    case Op::kBackwardWeight: return "backward_weight";
    case Op::kSendActivation: return "send_activation";
    case Op::kRecvActivation: return "recv_activation";
    case Op::kSendGradient: return "send_gradient";
    case Op::kRecvGradient: return "recv_gradient";
    case Op::kReduceGradients: return "reduce_gradients";
    case Op::kOptimizerStep: return "optimizer_step";
  }
  return "?";
}

uint64_t messageTag(bool gradient, int microbatch, int globalStage) {
  // High byte marks pipeline traffic so it can never equal a user's small tag.
  return (uint64_t{0x50} << 56) | (uint64_t{gradient ? 1u : 0u} << 48) |
         (static_cast<uint64_t>(static_cast<uint32_t>(microbatch) & 0xffffffu) << 24) |
         (static_cast<uint32_t>(globalStage) & 0xffffffu);
}

}  // namespace strata::pipeline
