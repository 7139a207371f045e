#include "pipeline/adapter/executor.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/types.h>

#include <algorithm>

#include "core/errors.h"
#include "core/seconds_since.h"
#include "core/logging.h"
#include "pipeline/schedule.h"
#include "adapter/layer_instrumentation.h"
#include "adapter/observers.h"

namespace strata::pipeline {
namespace {

using Clock = std::chrono::steady_clock;


int64_t bytesOf(const torch::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; }

// Split backward: the next layer's input, a leaf cut from `output` (so B and W can take
// one layer's backward at a time); it requires grad when `output` does.
torch::Tensor cutAfter(const torch::Tensor& output) {
  torch::Tensor input = output.detach();
  if (output.requires_grad()) input.requires_grad_(true);
  return input;
}

// Each tensor once (a tensor registered in two layers of one stage is one parameter).
std::vector<torch::Tensor> trainableParameters(const std::vector<Layer>& layers, int begin, int end) {
  std::vector<torch::Tensor> out;
  for (const auto& [name, p] : namedParameters(layers, begin, end)) {
    if (!p.requires_grad()) continue;
    const bool seen = std::any_of(out.begin(), out.end(), [&, &t = p](const torch::Tensor& q) { return q.is_same(t); });
    if (!seen) out.push_back(p);
  }
  return out;
}

}  // namespace

Executor::Executor(ExecutorSetup setup) : setup_(std::move(setup)) {
  STRATA_CHECK(setup_.layers != nullptr && !setup_.chunks.empty(), "pipeline executor: no layers or chunks");
  STRATA_CHECK(setup_.pipelineGroup != nullptr || setup_.partitions == 1, "pipeline executor: no pipeline group");
  STRATA_CHECK(!(setup_.splitBackward && setup_.activationCheckpointing),
               "pipeline executor: a split backward (zero_bubble) with activation checkpointing");
}

StepReport Executor::run(const Program& program, const StepInputs& inputs) {
  const auto start = Clock::now();
  in_ = &inputs;
  // The step has begun (DistributedModel::step): the observers know whether it is timed.
  timing_ = observe::observers().timing();
  modelTiming_ = timing_ || observe::observers().modelTiming();
  report_ = StepReport{};
  report_.outputs.resize(static_cast<size_t>(inputs.microbatches));
  stash_.clear();
  local_.clear();
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
      in_ = nullptr;
      timing_ = modelTiming_ = false;
      throw;
    }
  }
  finishSends();
  STRATA_CHECK(stash_.empty(), "pipeline: the program left ", stash_.size(),
               " microbatch stash(es) without a backward (an invalid program)");
  in_ = nullptr;
  timing_ = modelTiming_ = false;
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
      forward(in);
      break;
    case Op::kBackward:
      backward(in);
      break;
    case Op::kBackwardWeight:
      backwardWeight(in);
      break;
    case Op::kSendActivation: {
      Stash& st = stash_.at({in.chunk, in.microbatch});
      send(in, st.output.detach());
      break;
    }
    case Op::kRecvActivation: {
      const int stage = setup_.chunks.at(static_cast<size_t>(in.chunk)).globalStage;
      torch::Tensor x = recv(in, inputShape(stage));
      if (x.is_floating_point()) x.requires_grad_(true);
      stash_[{in.chunk, in.microbatch}].input = x;
      break;
    }
    case Op::kSendGradient: {
      auto it = stash_.find({in.chunk, in.microbatch});
      STRATA_CHECK(it != stash_.end() && it->second.gradIn.defined(), "pipeline: sending the input gradient of chunk ",
                   in.chunk, " microbatch ", in.microbatch, " before its backward");
      send(in, it->second.gradIn);
      it->second.gradIn = torch::Tensor();
      if (!setup_.splitBackward || it->second.layerOutputs.empty()) stash_.erase(it);  // else W frees it
      break;
    }
    case Op::kRecvGradient: {
      const ChunkRange& c = setup_.chunks.at(static_cast<size_t>(in.chunk));
      stash_[{in.chunk, in.microbatch}].gradOut = recv(in, in_->layerShapes.at(static_cast<size_t>(c.end - 1)));
      break;
    }
    case Op::kReduceGradients:
      if (in_->reduceGradients) in_->reduceGradients();
      break;
    case Op::kOptimizerStep:
      break;  // the user's DistributedOptimizer::step(), after DistributedModel::step() returns
  }
}

torch::Tensor Executor::slice(const torch::Tensor& t, int microbatch) const {
  const int64_t size = t.size(0) / in_->microbatches;
  return t.narrow(0, size * microbatch, size);
}

bool Executor::isLastStage(int chunk) const {
  return setup_.chunks.at(static_cast<size_t>(chunk)).globalStage == setup_.numStages - 1;
}

const TensorShape& Executor::inputShape(int globalStage) const {
  // Stage s starts at some layer b > 0; its input is layer b-1's output.
  for (const ChunkRange& c : setup_.chunks)
    if (c.globalStage == globalStage) return in_->layerShapes.at(static_cast<size_t>(c.begin - 1));
  STRATA_THROW(Error, "pipeline: global stage ", globalStage, " is not on this rank");
}

torch::Tensor Executor::forwardChunk(int chunk, int microbatch, const torch::Tensor& x) {
  STRATA_CHECK(in_ != nullptr, "pipeline: forwardChunk outside a step");
  const ChunkRange& c = setup_.chunks.at(static_cast<size_t>(chunk));
  SeedContext seed;
  if (in_->seedBase) seed = SeedContext{*in_->seedBase, in_->step, microbatch};
  Stash* cuts = cutsFor(chunk, microbatch);
  if (timing_) return recordedForward(chunk, microbatch, x, in_->seedBase ? &seed : nullptr, cuts);
  // Outside the profiler's detailed window the stage's forward is still one model-level slice.
  const int64_t startUs = modelTiming_ ? observe::observers().clockUs() : -1;
  torch::Tensor y = x;
  if (cuts == nullptr) {
    y = runLayers(*setup_.layers, c.begin, c.end, x, in_->seedBase ? &seed : nullptr);
  } else {
    cuts->layerInputs.clear();
    cuts->layerOutputs.clear();
    for (int i = c.begin; i < c.end; ++i) {
      if (i > c.begin) y = cutAfter(y);
      cuts->layerInputs.push_back(y);
      y = runLayers(*setup_.layers, i, i + 1, y, in_->seedBase ? &seed : nullptr);
      cuts->layerOutputs.push_back(y);
    }
  }
  if (startUs >= 0) observe::observers().chainForward(stageChain(chunk, microbatch), observe::spanSince(startUs));
  return y;
}

observe::LayerChain Executor::stageChain(int chunk, int microbatch) const {
  const ChunkRange& c = setup_.chunks.at(static_cast<size_t>(chunk));
  observe::LayerChain chain;
  chain.topName = "stage " + std::to_string(c.globalStage);
  for (int i = c.begin; i < c.end; ++i) chain.paths.push_back((*setup_.layers)[static_cast<size_t>(i)].name);
  chain.isStage = true;
  chain.stage.stage = c.globalStage;
  chain.stage.chunk = chunk;
  chain.stage.microbatch = microbatch;
  chain.stage.step = in_->step;
  return chain;
}

int64_t Executor::stageStartUs() const {
  if (timing_) return observe::observers().nowUs();
  return modelTiming_ ? observe::observers().clockUs() : -1;
}

Executor::Stash* Executor::cutsFor(int chunk, int microbatch) {
  if (!setup_.splitBackward || !torch::GradMode::is_enabled()) return nullptr;
  auto it = stash_.find({chunk, microbatch});
  return it == stash_.end() ? nullptr : &it->second;
}

// runLayers reporting each layer inside the stage's chain (same seeding).
torch::Tensor Executor::recordedForward(int chunk, int microbatch, const torch::Tensor& x, const SeedContext* seed,
                                        Stash* cuts) {
  const ChunkRange& c = setup_.chunks.at(static_cast<size_t>(chunk));
  const std::vector<Layer>& layers = *setup_.layers;
  observe::LayerChain chain = stageChain(chunk, microbatch);
  observe::Interest interest;
  interest.times = true;
  instrument::LayerRecorder recorder(
      std::move(chain), x, interest, [](size_t) { return std::vector<torch::Tensor>(); },
      instrument::BackwardTiming::kStage);  // the stage's whole backward is timed in backward()
  torch::Tensor y = x;
  if (cuts) {
    cuts->layerInputs.clear();
    cuts->layerOutputs.clear();
  }
  for (int i = c.begin; i < c.end; ++i) {
    const auto k = static_cast<size_t>(i - c.begin);
    if (seed) torch::manual_seed(layerSeed(seed->base, seed->step, seed->microbatch, i));
    if (cuts && i > c.begin) y = cutAfter(y);
    if (cuts) cuts->layerInputs.push_back(y);
    recorder.begin(k);
    y = layers[static_cast<size_t>(i)].module.forward<torch::Tensor>(y);
    recorder.end(k, &y);
    if (cuts) cuts->layerOutputs.push_back(y);
  }
  recorder.finish(y);
  if (auto done = recorder.backwardDone()) stash_[{chunk, microbatch}].layerBackwardDone = std::move(done);
  return y;
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
  t.stage = setup_.chunks.at(static_cast<size_t>(in.chunk)).globalStage;
  t.microbatch = in.microbatch;
  t.bytes = bytes;
  t.span = observe::spanSince(startUs);
  observe::observers().transfer(t);
}

void Executor::forward(const Instruction& in) {
  const auto start = Clock::now();
  const ChunkRange& c = setup_.chunks.at(static_cast<size_t>(in.chunk));
  Stash& st = stash_[{in.chunk, in.microbatch}];
  if (c.globalStage == 0) st.input = slice(in_->data, in.microbatch);
  STRATA_CHECK(st.input.defined(), "pipeline: forward of stage ", c.globalStage, " microbatch ", in.microbatch,
               " before its activation was received");
  if (isLastStage(in.chunk)) {
    auto [result, loss] = in_->lastStage(in.microbatch, st.input, slice(in_->target, in.microbatch));
    STRATA_CHECK(result.defined(), "the step function returned an undefined tensor for microbatch ", in.microbatch);
    report_.outputs[static_cast<size_t>(in.microbatch)] = result.detach();
    st.loss = loss;
  } else if (setup_.activationCheckpointing) {
    torch::NoGradGuard noGrad;
    st.output = forwardChunk(in.chunk, in.microbatch, st.input);
    st.checkpointed = true;
  } else {
    st.output = forwardChunk(in.chunk, in.microbatch, st.input);
  }
  report_.computeSeconds += secondsSince(start);
  trackStash();
}

void Executor::backward(const Instruction& in) {
  const auto start = Clock::now();
  const int64_t startUs = stageStartUs();
  auto it = stash_.find({in.chunk, in.microbatch});
  STRATA_CHECK(it != stash_.end(), "pipeline: backward of chunk ", in.chunk, " microbatch ", in.microbatch,
               " without its forward");
  Stash& st = it->second;
  if (setup_.splitBackward) {
    backwardInput(in, st);
    endLayerBackward(st);
    const double seconds = secondsSince(start);
    report_.computeSeconds += seconds;
    report_.backwardSeconds += seconds;
    if (startUs >= 0)
      observe::observers().stageBackward({setup_.chunks.at(static_cast<size_t>(in.chunk)).globalStage, in.chunk,
                                          in.microbatch, in_->step, false, observe::spanSince(startUs)});
    return;
  }
  if (in_->beforeBackward) in_->beforeBackward(in.chunk, in.microbatch);
  if (isLastStage(in.chunk)) {
    STRATA_CHECK(st.loss.defined(), "the step function did not call model.backward(loss) for microbatch ",
                 in.microbatch, " on the last pipeline stage");
    // The one place the loss is scaled: gradients are the mean over microbatches, exactly
    // as one process computing (loss / m).backward() per microbatch.
    (st.loss / in_->microbatches).backward();
  } else {
    STRATA_CHECK(st.gradOut.defined(), "pipeline: backward of chunk ", in.chunk, " microbatch ", in.microbatch,
                 " before its output gradient was received");
    if (st.checkpointed) st.output = forwardChunk(in.chunk, in.microbatch, st.input);
    if (st.output.requires_grad()) torch::autograd::backward({st.output}, {st.gradOut});
  }
  endLayerBackward(st);
  if (in_->afterBackward) in_->afterBackward(in.chunk, in.microbatch);
  const int stage = setup_.chunks.at(static_cast<size_t>(in.chunk)).globalStage;
  if (startUs >= 0)
    observe::observers().stageBackward(
        {stage, in.chunk, in.microbatch, in_->step, st.checkpointed, observe::spanSince(startUs)});
  const bool first = stage == 0;
  if (!first) {
    st.gradIn = st.input.grad().defined() ? st.input.grad() : torch::zeros_like(st.input);
    st.input = st.output = st.loss = st.gradOut = torch::Tensor();
  } else {
    stash_.erase(it);
  }
  const double seconds = secondsSince(start);
  report_.computeSeconds += seconds;
  report_.backwardSeconds += seconds;
}

// B: the gradient w.r.t. the stage input, layer by layer from the root (the output with the
// received gradient, or the loss / m on the last stage), keeping each layer's output
// gradient for W. The graph is retained for W.
void Executor::backwardInput(const Instruction& in, Stash& st) {
  const bool last = isLastStage(in.chunk);
  if (last) {
    STRATA_CHECK(st.loss.defined(), "the step function did not call model.backward(loss) for microbatch ",
                 in.microbatch, " on the last pipeline stage");
  } else {
    STRATA_CHECK(st.gradOut.defined(), "pipeline: backward of chunk ", in.chunk, " microbatch ", in.microbatch,
                 " before its output gradient was received");
  }
  STRATA_CHECK(!st.layerOutputs.empty(), "pipeline: split backward of chunk ", in.chunk, " microbatch ", in.microbatch,
               " without its layers' forward (the step function must call the model once per microbatch)");
  const size_t n = st.layerOutputs.size();
  // The root replaces the last layer's output; on the last stage the scaled loss, as in
  // the full backward: the one place the loss is scaled.
  if (last) st.layerOutputs[n - 1] = st.loss / in_->microbatches;
  st.layerOutputGrads.assign(n, torch::Tensor());
  if (!last) st.layerOutputGrads[n - 1] = st.gradOut;
  torch::Tensor inputGrad;
  for (size_t k = n; k-- > 0;) {
    const torch::Tensor& x = st.layerInputs[k];
    const torch::Tensor& y = st.layerOutputs[k];
    if (!x.requires_grad() || !y.requires_grad()) break;  // nothing before it needs a gradient
    if (!last || k + 1 < n) STRATA_CHECK(st.layerOutputGrads[k].defined(), "pipeline: no gradient reached layer ", k);
    torch::Tensor g = torch::autograd::grad({y}, {x}, {st.layerOutputGrads[k]}, /*retain_graph=*/true,
                                            /*create_graph=*/false, /*allow_unused=*/true)[0];
    if (!g.defined()) g = torch::zeros_like(x);
    if (k > 0) st.layerOutputGrads[k - 1] = g;
    else inputGrad = g;
  }
  st.inputGradientDone = true;
  if (setup_.chunks.at(static_cast<size_t>(in.chunk)).globalStage > 0)
    st.gradIn = inputGrad.defined() ? inputGrad : torch::zeros_like(st.input);
}

// W: every layer's parameter gradients from its output gradient, in one backward restricted
// to the chunk's parameters (accumulated into .grad); frees the stash.
void Executor::backwardWeight(const Instruction& in) {
  const auto start = Clock::now();
  const int64_t startUs = stageStartUs();
  STRATA_CHECK(setup_.splitBackward, "pipeline: a weight-gradient pass (W) in a program without split backward");
  auto it = stash_.find({in.chunk, in.microbatch});
  STRATA_CHECK(it != stash_.end() && it->second.inputGradientDone, "pipeline: weight gradients of chunk ", in.chunk,
               " microbatch ", in.microbatch, " before its input gradient (B)");
  Stash& st = it->second;
  const ChunkRange& c = setup_.chunks.at(static_cast<size_t>(in.chunk));
  if (in_->beforeBackward) in_->beforeBackward(in.chunk, in.microbatch);
  std::vector<torch::Tensor> roots, grads;
  for (size_t k = 0; k < st.layerOutputs.size(); ++k) {
    const torch::Tensor& y = st.layerOutputs[k];
    const bool root = k + 1 == st.layerOutputs.size() && isLastStage(in.chunk);  // the loss: implicit 1
    if (!y.requires_grad() || (!root && !st.layerOutputGrads[k].defined())) continue;
    roots.push_back(y);
    grads.push_back(st.layerOutputGrads[k]);
  }
  const std::vector<torch::Tensor> params = trainableParameters(*setup_.layers, c.begin, c.end);
  if (!roots.empty() && !params.empty())
    torch::autograd::backward(roots, grads, /*retain_graph=*/false, /*create_graph=*/false, params);
  if (in_->afterBackward) in_->afterBackward(in.chunk, in.microbatch);
  if (startUs >= 0)
    observe::observers().stageBackward(
        {c.globalStage, in.chunk, in.microbatch, in_->step, false, observe::spanSince(startUs), true});
  if (st.gradIn.defined()) {  // not sent yet (programs send right after B; kept for safety)
    st.layerInputs.clear();
    st.layerOutputs.clear();
    st.layerOutputGrads.clear();
    st.output = st.loss = st.gradOut = torch::Tensor();
  } else {
    stash_.erase(it);
  }
  const double seconds = secondsSince(start);
  report_.computeSeconds += seconds;
  report_.backwardSeconds += seconds;
  report_.weightGradientSeconds += seconds;
}

void Executor::endLayerBackward(Stash& st) {
  if (!st.layerBackwardDone) return;
  st.layerBackwardDone();
  st.layerBackwardDone = nullptr;
}

void Executor::trackStash() {
  int inFlight = 0;
  int64_t bytes = 0;
  for (const auto& [key, st] : stash_) {
    if (!st.output.defined() && !st.loss.defined()) continue;
    ++inFlight;
    bytes += bytesOf(st.input) + (st.checkpointed ? 0 : bytesOf(st.output));
  }
  report_.peakInFlight = std::max(report_.peakInFlight, inFlight);
  report_.peakStashBytes = std::max(report_.peakStashBytes, bytes);
}

void Executor::send(const Instruction& in, const torch::Tensor& tensor) {
  const uint64_t tag = instructionTag(in, setup_.rank, setup_.partitions);
  torch::Tensor buffer = tensor.contiguous();
  if (in.peer == setup_.rank) {  // adjacent stages on this same rank: no wire
    local_[tag] = buffer;
    return;
  }
  const int64_t startUs = timing_ ? observe::observers().nowUs() : -1;
  auto work = setup_.pipelineGroup->isend(buffer.data_ptr(), buffer.nbytes(), in.peer, tag);
  if (timing_) reportTransfer(in, startUs, static_cast<int64_t>(buffer.nbytes()));
  sends_.push_back({std::move(work), std::move(buffer)});
}

torch::Tensor Executor::recv(const Instruction& in, const TensorShape& shape) {
  const uint64_t tag = instructionTag(in, setup_.rank, setup_.partitions);
  const int64_t batch = in_->data.size(0) / in_->microbatches;
  if (in.peer == setup_.rank) {
    auto it = local_.find(tag);
    STRATA_CHECK(it != local_.end(), "pipeline: receive from this same rank before the matching send (tag ", tag, ")");
    torch::Tensor t = it->second.detach().clone();
    local_.erase(it);
    return t;
  }
  torch::Tensor t = shape.empty(batch);
  const auto start = Clock::now();
  const int64_t startUs = timing_ ? observe::observers().nowUs() : -1;
  setup_.pipelineGroup->irecv(t.data_ptr(), t.nbytes(), in.peer, tag)->wait();
  report_.recvWaitSeconds += secondsSince(start);
  if (timing_) reportTransfer(in, startUs, static_cast<int64_t>(t.nbytes()));
  return t;
}

void Executor::finishSends() {
  const int64_t startUs = timing_ && !sends_.empty() ? observe::observers().nowUs() : -1;
  for (auto& s : sends_) s.work->wait();
  if (startUs >= 0) observe::observers().sendsWaited(observe::spanSince(startUs), static_cast<int64_t>(sends_.size()));
  sends_.clear();
}

}  // namespace strata::pipeline
