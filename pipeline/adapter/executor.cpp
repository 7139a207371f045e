#include "pipeline/adapter/executor.h"

#include <chrono>

#include "adapter/observe/observers.h"
#include "core/errors.h"
#include "core/logging.h"
#include "core/seconds_since.h"
#include "pipeline/schedule.h"

namespace strata::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

int64_t bytesOf(const Boundary& values) {
  int64_t bytes = 0;
  for (const auto& t : values) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

}  // namespace

Executor::Executor(Stage& stage, ExecutorSetup setup) : stage_(stage), setup_(std::move(setup)) {
  STRATA_CHECK(setup_.pipelineGroup != nullptr || setup_.partitions == 1, "pipeline executor: no pipeline group");
}

StepReport Executor::run(const Program& program, const StepInputs& inputs) {
  const auto start = Clock::now();
  in_ = &inputs;
  // The step has begun (DistributedModel::step): the observers know whether it is timed.
  timing_ = observe::observers().timing();
  const StepTiming timing{timing_, timing_ || observe::observers().modelTiming()};
  report_ = StepReport{};
  report_.outputs.resize(static_cast<size_t>(inputs.microbatches));
  local_.clear();
  stage_.beginStep(inputs, timing, &report_);
  for (const Instruction& instruction : program.instructions) {
    try {
      execute(instruction);
    } catch (...) {
      STRATA_LOG(kError, kPipe, "pipeline: instruction ", formatInstruction(instruction, setup_.rank, setup_.partitions),
                 " failed in step ", inputs.step, "; program: ", formatProgram(program, setup_.partitions));
      // Sends still in flight reference our buffers: let them finish or fail by their timeout.
      try {
        finishSends();
      } catch (...) {
      }
      stage_.endStep(/*failed=*/true);
      in_ = nullptr;
      timing_ = false;
      throw;
    }
  }
  finishSends();
  in_ = nullptr;
  timing_ = false;
  stage_.endStep(/*failed=*/false);
  report_.totalSeconds = secondsSince(start);
  StepReport out = std::move(report_);
  report_ = StepReport{};
  return out;
}

void Executor::execute(const Instruction& in) {
  switch (in.op) {
    case Op::kLoadMicrobatch:
      break;  // the data is sliced where it is used (forward: input; last stage: target)
    case Op::kForward:
      stage_.forward(in.chunk, in.microbatch);
      break;
    case Op::kBackward:
      stage_.backward(in.chunk, in.microbatch);
      break;
    case Op::kBackwardWeight:
      stage_.backwardWeight(in.chunk, in.microbatch);
      break;
    case Op::kSendActivation:
      send(in, stage_.output(in.chunk, in.microbatch));
      break;
    case Op::kRecvActivation:
      stage_.setInput(in.chunk, in.microbatch, recv(in, stage_.inputShapes(in.chunk)));
      break;
    case Op::kSendGradient:
      send(in, stage_.takeInputGradient(in.chunk, in.microbatch));
      break;
    case Op::kRecvGradient:
      stage_.setOutputGradient(in.chunk, in.microbatch, recv(in, stage_.outputShapes(in.chunk)));
      break;
    case Op::kReduceGradients:
      if (in_->reduceGradients) in_->reduceGradients();
      break;
    case Op::kOptimizerStep:
      break;  // the user's DistributedOptimizer::step(), after DistributedModel::step() returns
  }
}

void Executor::reportTransfer(const Instruction& in, int64_t startUs, int64_t bytes) {
  observe::Transfer t;
  switch (in.op) {
    case Op::kSendActivation: t.kind = observe::Transfer::Kind::kSendActivation; break;
    case Op::kSendGradient: t.kind = observe::Transfer::Kind::kSendGradient; break;
    case Op::kRecvActivation: t.kind = observe::Transfer::Kind::kRecvActivation; break;
    default: t.kind = observe::Transfer::Kind::kRecvGradient; break;
  }
  t.peer = in.peer;
  t.stage = stage_.globalStage(in.chunk);
  t.microbatch = in.microbatch;
  t.bytes = bytes;
  t.span = observe::spanSince(startUs);
  observe::observers().transfer(t);
}

void Executor::send(const Instruction& in, Boundary values) {
  const uint64_t tag = instructionTag(in, setup_.rank, setup_.partitions);
  for (auto& t : values) t = t.contiguous();
  if (in.peer == setup_.rank) {  // adjacent stages on this same rank: no wire
    local_[tag] = std::move(values);
    return;
  }
  const int64_t startUs = timing_ ? observe::observers().nowUs() : -1;
  for (auto& buffer : values) {
    auto work = setup_.pipelineGroup->isend(buffer.data_ptr(), buffer.nbytes(), in.peer, tag);
    sends_.push_back({std::move(work), buffer});
  }
  if (timing_) reportTransfer(in, startUs, bytesOf(values));
}

Boundary Executor::recv(const Instruction& in, const BoundaryShapes& shapes) {
  const uint64_t tag = instructionTag(in, setup_.rank, setup_.partitions);
  const int64_t batch = in_->data.size(0) / in_->microbatches;
  if (in.peer == setup_.rank) {
    auto it = local_.find(tag);
    STRATA_CHECK(it != local_.end(), "pipeline: receive from this same rank before the matching send (tag ", tag, ")");
    Boundary values;
    for (const auto& t : it->second) values.push_back(t.detach().clone());
    local_.erase(it);
    return values;
  }
  Boundary values;
  for (const TensorShape& shape : shapes) values.push_back(shape.empty(batch));
  const auto start = Clock::now();
  const int64_t startUs = timing_ ? observe::observers().nowUs() : -1;
  for (auto& t : values) setup_.pipelineGroup->irecv(t.data_ptr(), t.nbytes(), in.peer, tag)->wait();
  report_.recvWaitSeconds += secondsSince(start);
  if (timing_) reportTransfer(in, startUs, bytesOf(values));
  return values;
}

void Executor::finishSends() {
  const int64_t startUs = timing_ && !sends_.empty() ? observe::observers().nowUs() : -1;
  for (auto& s : sends_) s.work->wait();
  if (startUs >= 0) observe::observers().sendsWaited(observe::spanSince(startUs), static_cast<int64_t>(sends_.size()));
  sends_.clear();
}

}  // namespace strata::pipeline
