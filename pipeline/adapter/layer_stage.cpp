#include "pipeline/adapter/layer_stage.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/types.h>

#include <algorithm>
#include <chrono>

#include "adapter/observe/layer_instrumentation.h"
#include "adapter/observe/observers.h"
#include "core/errors.h"
#include "core/seconds_since.h"
#include "pipeline/adapter/last_stage_call.h"

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

torch::Tensor single(Boundary values, const char* what) {
  STRATA_CHECK(values.size() == 1, "pipeline: a layer stage's ", what, " is one tensor, got ", values.size());
  return std::move(values.front());
}

}  // namespace

LayerStage::LayerStage(LayerStageSetup setup) : setup_(std::move(setup)) {
  STRATA_CHECK(setup_.layers != nullptr && !setup_.chunks.empty(), "pipeline stage: no layers or chunks");
  STRATA_CHECK(!(setup_.splitBackward && setup_.activationCheckpointing),
               "pipeline stage: a split backward (zero_bubble) with activation checkpointing");
}

void LayerStage::beginStep(const StepInputs& inputs, StepTiming timing, StepReport* report) {
  in_ = &inputs;
  timing_ = timing;
  report_ = report;
  stash_.clear();
}

void LayerStage::endStep(bool failed) {
  const size_t left = stash_.size();
  stash_.clear();
  in_ = nullptr;
  report_ = nullptr;
  timing_ = StepTiming{};
  if (!failed)
    STRATA_CHECK(left == 0, "pipeline: the program left ", left,
                 " microbatch stash(es) without a backward (an invalid program)");
}

BoundaryShapes LayerStage::inputShapes(int chunk) const {
  // A stage starting at layer b > 0 takes layer b-1's output.
  return {in_->layerShapes.at(static_cast<size_t>(chunkAt(chunk).begin - 1))};
}

BoundaryShapes LayerStage::outputShapes(int chunk) const {
  return {in_->layerShapes.at(static_cast<size_t>(chunkAt(chunk).end - 1))};
}

LayerStage::Stash& LayerStage::stashOf(int chunk, int microbatch, const char* what) {
  auto it = stash_.find({chunk, microbatch});
  STRATA_CHECK(it != stash_.end(), "pipeline: ", what, " of chunk ", chunk, " microbatch ", microbatch,
               " without its forward");
  return it->second;
}

void LayerStage::setInput(int chunk, int microbatch, Boundary input) {
  torch::Tensor x = single(std::move(input), "input");
  if (x.is_floating_point()) x.requires_grad_(true);
  stash_[{chunk, microbatch}].input = x;
}

Boundary LayerStage::output(int chunk, int microbatch) {
  return {stashOf(chunk, microbatch, "sending the output").output.detach()};
}

void LayerStage::setOutputGradient(int chunk, int microbatch, Boundary gradient) {
  stash_[{chunk, microbatch}].gradOut = single(std::move(gradient), "output gradient");
}

Boundary LayerStage::takeInputGradient(int chunk, int microbatch) {
  auto it = stash_.find({chunk, microbatch});
  STRATA_CHECK(it != stash_.end() && it->second.gradIn.defined(), "pipeline: sending the input gradient of chunk ",
               chunk, " microbatch ", microbatch, " before its backward");
  torch::Tensor gradIn = std::move(it->second.gradIn);
  it->second.gradIn = torch::Tensor();
  if (!setup_.splitBackward || it->second.layerOutputs.empty()) stash_.erase(it);  // else W frees it
  return {gradIn};
}

torch::Tensor LayerStage::slice(const torch::Tensor& t, int microbatch) const {
  const int64_t size = t.size(0) / in_->microbatches;
  return t.narrow(0, size * microbatch, size);
}

void LayerStage::addCompute(double seconds, bool backward, bool weight) {
  report_->computeSeconds += seconds;
  if (backward) report_->backwardSeconds += seconds;
  if (weight) report_->weightGradientSeconds += seconds;
}

torch::Tensor LayerStage::forwardChunk(int chunk, int microbatch, const torch::Tensor& x) {
  STRATA_CHECK(in_ != nullptr, "pipeline: forwardChunk outside a step");
  const ChunkRange& c = chunkAt(chunk);
  SeedContext seed;
  if (in_->seedBase) seed = SeedContext{*in_->seedBase, in_->step, microbatch};
  Stash* cuts = cutsFor(chunk, microbatch);
  if (timing_.detailed) return recordedForward(chunk, microbatch, x, in_->seedBase ? &seed : nullptr, cuts);
  // Outside the profiler's detailed window the stage's forward is still one model-level slice.
  const int64_t startUs = timing_.modelLevel ? observe::observers().clockUs() : -1;
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

observe::LayerChain LayerStage::stageChain(int chunk, int microbatch) const {
  const ChunkRange& c = chunkAt(chunk);
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

int64_t LayerStage::stageStartUs() const {
  if (timing_.detailed) return observe::observers().nowUs();
  return timing_.modelLevel ? observe::observers().clockUs() : -1;
}

void LayerStage::reportBackward(int chunk, int microbatch, int64_t startUs, bool checkpointed, bool weight) const {
  if (startUs < 0) return;
  observe::observers().stageBackward(
      {globalStage(chunk), chunk, microbatch, in_->step, checkpointed, observe::spanSince(startUs), weight});
}

LayerStage::Stash* LayerStage::cutsFor(int chunk, int microbatch) {
  if (!setup_.splitBackward || !torch::GradMode::is_enabled()) return nullptr;
  auto it = stash_.find({chunk, microbatch});
  return it == stash_.end() ? nullptr : &it->second;
}

// runLayers reporting each layer inside the stage's chain (same seeding).
torch::Tensor LayerStage::recordedForward(int chunk, int microbatch, const torch::Tensor& x, const SeedContext* seed,
                                          Stash* cuts) {
  const ChunkRange& c = chunkAt(chunk);
  const std::vector<Layer>& layers = *setup_.layers;
  observe::Interest interest;
  interest.times = true;
  instrument::LayerRecorder recorder(
      stageChain(chunk, microbatch), x, interest, [](size_t) { return std::vector<torch::Tensor>(); },
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

void LayerStage::forward(int chunk, int microbatch) {
  const auto start = Clock::now();
  Stash& st = stash_[{chunk, microbatch}];
  if (globalStage(chunk) == 0) st.input = slice(in_->data, microbatch);
  STRATA_CHECK(st.input.defined(), "pipeline: forward of stage ", globalStage(chunk), " microbatch ", microbatch,
               " before its activation was received");
  if (isLastStage(chunk)) {
    runLastStage(chunk, microbatch, st);
  } else if (setup_.activationCheckpointing) {
    torch::NoGradGuard noGrad;
    st.output = forwardChunk(chunk, microbatch, st.input);
    st.checkpointed = true;
  } else {
    st.output = forwardChunk(chunk, microbatch, st.input);
  }
  addCompute(secondsSince(start), false);
  trackStash();
}

void LayerStage::runLastStage(int chunk, int microbatch, Stash& st) {
  LastStageCall call(*this, chunk, microbatch);
  torch::Tensor result = in_->lastStage(call, st.input, slice(in_->target, microbatch));
  STRATA_CHECK(result.defined(), "the step function returned an undefined tensor for microbatch ", microbatch);
  report_->outputs[static_cast<size_t>(microbatch)] = result.detach();
  st.loss = call.loss();
}

void LayerStage::backward(int chunk, int microbatch) {
  const auto start = Clock::now();
  const int64_t startUs = stageStartUs();
  auto it = stash_.find({chunk, microbatch});
  STRATA_CHECK(it != stash_.end(), "pipeline: backward of chunk ", chunk, " microbatch ", microbatch,
               " without its forward");
  Stash& st = it->second;
  if (setup_.splitBackward) {
    backwardInput(chunk, microbatch, st);
    endLayerBackward(st);
    addCompute(secondsSince(start), true);
    reportBackward(chunk, microbatch, startUs, false, false);
    return;
  }
  if (in_->beforeBackward) in_->beforeBackward(chunk, microbatch);
  if (isLastStage(chunk)) {
    STRATA_CHECK(st.loss.defined(), "the step function did not call model.backward(loss) for microbatch ",
                 microbatch, " on the last pipeline stage");
    // The one place the loss is scaled: gradients are the mean over microbatches, exactly
    // as one process computing (loss / m).backward() per microbatch.
    (st.loss / in_->microbatches).backward();
  } else {
    STRATA_CHECK(st.gradOut.defined(), "pipeline: backward of chunk ", chunk, " microbatch ", microbatch,
                 " before its output gradient was received");
    if (st.checkpointed) st.output = forwardChunk(chunk, microbatch, st.input);
    if (st.output.requires_grad()) torch::autograd::backward({st.output}, {st.gradOut});
  }
  endLayerBackward(st);
  if (in_->afterBackward) in_->afterBackward(chunk, microbatch);
  reportBackward(chunk, microbatch, startUs, st.checkpointed, false);
  if (globalStage(chunk) != 0) {
    st.gradIn = st.input.grad().defined() ? st.input.grad() : torch::zeros_like(st.input);
    st.input = st.output = st.loss = st.gradOut = torch::Tensor();
  } else {
    stash_.erase(it);
  }
  addCompute(secondsSince(start), true);
}

// B: the gradient w.r.t. the stage input, layer by layer from the root (the output with the
// received gradient, or the loss / m on the last stage), keeping each layer's output
// gradient for W. The graph is retained for W.
void LayerStage::backwardInput(int chunk, int microbatch, Stash& st) {
  const bool last = isLastStage(chunk);
  if (last) {
    STRATA_CHECK(st.loss.defined(), "the step function did not call model.backward(loss) for microbatch ",
                 microbatch, " on the last pipeline stage");
  } else {
    STRATA_CHECK(st.gradOut.defined(), "pipeline: backward of chunk ", chunk, " microbatch ", microbatch,
                 " before its output gradient was received");
  }
  STRATA_CHECK(!st.layerOutputs.empty(), "pipeline: split backward of chunk ", chunk, " microbatch ", microbatch,
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
  if (globalStage(chunk) > 0) st.gradIn = inputGrad.defined() ? inputGrad : torch::zeros_like(st.input);
}

// W: every layer's parameter gradients from its output gradient, in one backward restricted
// to the chunk's parameters (accumulated into .grad); frees the stash.
void LayerStage::backwardWeight(int chunk, int microbatch) {
  const auto start = Clock::now();
  const int64_t startUs = stageStartUs();
  STRATA_CHECK(setup_.splitBackward, "pipeline: a weight-gradient pass (W) in a program without split backward");
  auto it = stash_.find({chunk, microbatch});
  STRATA_CHECK(it != stash_.end() && it->second.inputGradientDone, "pipeline: weight gradients of chunk ", chunk,
               " microbatch ", microbatch, " before its input gradient (B)");
  Stash& st = it->second;
  const ChunkRange& c = chunkAt(chunk);
  if (in_->beforeBackward) in_->beforeBackward(chunk, microbatch);
  std::vector<torch::Tensor> roots, grads;
  for (size_t k = 0; k < st.layerOutputs.size(); ++k) {
    const torch::Tensor& y = st.layerOutputs[k];
    const bool root = k + 1 == st.layerOutputs.size() && isLastStage(chunk);  // the loss: implicit 1
    if (!y.requires_grad() || (!root && !st.layerOutputGrads[k].defined())) continue;
    roots.push_back(y);
    grads.push_back(st.layerOutputGrads[k]);
  }
  const std::vector<torch::Tensor> params = trainableParameters(*setup_.layers, c.begin, c.end);
  if (!roots.empty() && !params.empty())
    torch::autograd::backward(roots, grads, /*retain_graph=*/false, /*create_graph=*/false, params);
  if (in_->afterBackward) in_->afterBackward(chunk, microbatch);
  reportBackward(chunk, microbatch, startUs, false, true);
  if (st.gradIn.defined()) {  // not sent yet (programs send right after B; kept for safety)
    st.layerInputs.clear();
    st.layerOutputs.clear();
    st.layerOutputGrads.clear();
    st.output = st.loss = st.gradOut = torch::Tensor();
  } else {
    stash_.erase(it);
  }
  addCompute(secondsSince(start), true, true);
}

void LayerStage::endLayerBackward(Stash& st) {
  if (!st.layerBackwardDone) return;
  st.layerBackwardDone();
  st.layerBackwardDone = nullptr;
}

void LayerStage::trackStash() {
  int inFlight = 0;
  int64_t bytes = 0;
  for (const auto& [key, st] : stash_) {
    if (!st.output.defined() && !st.loss.defined()) continue;
    ++inFlight;
    bytes += bytesOf(st.input) + (st.checkpointed ? 0 : bytesOf(st.output));
  }
  report_->peakInFlight = std::max(report_->peakInFlight, inFlight);
  report_->peakStashBytes = std::max(report_->peakStashBytes, bytes);
}

}  // namespace strata::pipeline
