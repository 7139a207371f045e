// End to end under mpirun (2 or 4 ranks, tests/pp/pipeline_profiler_e2e.sh): a 2-stage pipeline
// (manual partition: fc1, relu1 on stage 0; fc2, relu2, fc3 on stage 1; 4 microbatches) trained
// through DistributedModel with the profiler configured as a user would (system metrics every
// 100 ms, framework timeline for steps 1..3). After finalize, rank 0 reads the profiler files
// back and checks: system metrics files and the end marker; valid Perfetto traces (strict
// nesting per track); per rank step events and, as smdebug's model-level events, per microbatch one
// "stage <s>" Forward and Backward slice (args.microbatch) at every step; the rest inside the
// window: each layer of its stage as a Forward-SubModuleInternal slice inside a stage Forward
// and as a Backward-SubModuleInternal slice inside a stage Backward, and on the pipeline track the
// receives (the waits: activations on stage 1, gradients on stage 0) and sends with their
// peer and microbatch. On 4 ranks (hybrid: 2 pipelines x 2 data-parallel replicas, "ddp": true)
// every rank also records its gradient reduction: one AllReduceWait per step and AllReduce
// slices per bucket. Exit status 0 when everything holds, 1 with one line per problem.
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "profiler/timeline_reader.h"
#include "profiler/trace_check.h"  // tests/profiler
#include "strata/strata.h"
#include "testing/e2e_checker.h"
#include "testing/e2e_training.h"
#include "testing/e2e_profiler_files.h"

namespace {

namespace fs = std::filesystem;
constexpr int64_t kSteps = 6;
constexpr int64_t kWindowStart = 1, kWindowSteps = 3;  // as in pipeline_profiler_e2e.sh
constexpr int kMicrobatches = 4;                        // as in pipeline_profiler_e2e.sh
const std::vector<std::vector<std::string>> kStageLayers = {{"fc1", "relu1"}, {"fc2", "relu2", "fc3"}};

void train() {
  torch::manual_seed(7);
  torch::nn::Sequential net({{"fc1", torch::nn::Linear(8, 32)},
                             {"relu1", torch::nn::ReLU()},
                             {"fc2", torch::nn::Linear(32, 32)},
                             {"relu2", torch::nn::ReLU()},
                             {"fc3", torch::nn::Linear(32, 4)}});
  strata::DistributedModel model(net);
  strata::DistributedOptimizer opt(torch::optim::SGD(model.parameters(), 0.05), model);
  for (int64_t step = 0; step < kSteps; ++step) {
    torch::manual_seed(100 + step);  // the same batch on both ranks of the pipeline
    const torch::Tensor x = torch::randn({16, 8}), y = torch::randn({16, 4});
    strata::testing::trainStep(model, opt, x, y, strata::testing::Loss::kMse);
  }
}

using strata::testing::Checker;

int64_t intArg(const strata::profiler::TraceEvent& e, const char* key) {
  const auto it = e.args.find(key);
  return it != e.args.end() && it->is_number_integer() ? it->get<int64_t>() : -1;
}

void checkRank(strata::profiler::TimelineReader& reader, int rank, bool hybrid, Checker& c) {
  using strata::profiler::TraceEvent;
  strata::profiler::TraceQuery q;
  q.rank = rank;
  const std::vector<TraceEvent> events = reader.events(q);
  const std::string r = "rank " + std::to_string(rank) + ": ";
  const int ppRank = rank % 2;  // "cluster" placement: a pipeline's ranks are adjacent
  const std::string stage = "stage " + std::to_string(ppRank);
  const auto stageLevel = [&](const TraceEvent& e) {
    return (e.phase == "Forward" || e.phase == "Backward(post-forward)") && e.name.rfind(stage, 0) == 0;
  };
  std::set<int64_t> stepNums, stepEvents;
  std::map<std::string, std::vector<const TraceEvent*>> byPhase;
  for (const auto& e : events) {
    byPhase[e.phase].push_back(&e);
    if (e.phase == "Step:ModeKeys.TRAIN" && e.stepNum()) stepEvents.insert(*e.stepNum());
    else if (e.stepNum() && !stageLevel(e)) stepNums.insert(*e.stepNum());
  }
  c.expect(stepEvents == std::set<int64_t>{0, 1, 2, 3, 4, 5}, r + "step events at every step");
  c.expect(!stepNums.empty() && *stepNums.begin() >= kWindowStart && *stepNums.rbegin() < kWindowStart + kWindowSteps,
           r + "detailed events (layers, transfers) only inside the window");

  // Per phase: (step, microbatch) pairs of this rank's stage slices: at every step.
  auto microbatchesOf = [&](const std::string& phase, const std::string& name) {
    std::multiset<std::pair<int64_t, int64_t>> seen;
    for (const TraceEvent* e : byPhase[phase])
      if (e->name == name) seen.insert({intArg(*e, "step"), intArg(*e, "microbatch")});
    return seen;
  };
  std::multiset<std::pair<int64_t, int64_t>> every, allSteps;
  for (int64_t s = 0; s < kSteps; ++s)
    for (int64_t mb = 0; mb < kMicrobatches; ++mb) {
      allSteps.insert({s, mb});
      if (s >= kWindowStart && s < kWindowStart + kWindowSteps) every.insert({s, mb});
    }
  c.expect(microbatchesOf("Forward", stage) == allSteps,
           r + "one " + stage + " Forward per step and microbatch, in and outside the window");
  c.expect(microbatchesOf("Backward(post-forward)", stage) == allSteps,
           r + "one " + stage + " Backward per step and microbatch, in and outside the window");
  // zero_bubble (PIPELINE=zero_bubble, set by the script's caller): W's are slices of their own.
  const char* pipelineName = std::getenv("PIPELINE");
  const bool split = pipelineName != nullptr && std::string(pipelineName) == "zero_bubble";
  const auto weightSlices = microbatchesOf("Backward(post-forward)", stage + " W");
  c.expect(split ? weightSlices == allSteps : weightSlices.empty(),
           r + stage + " W slices " + (split ? "once per step and microbatch" : "absent"));
  for (const TraceEvent* e : byPhase["Forward"])
    c.expect(e->name == stage && e->tid == 2, r + "Forward slice " + e->name + " on the compute track");

  // Every layer of the stage, once per microbatch, inside a stage Forward slice.
  std::map<std::string, int> layerCount;
  for (const TraceEvent* l : byPhase["Forward-SubModuleInternal"]) {
    ++layerCount[l->name];
    bool inside = false;
    for (const TraceEvent* f : byPhase["Forward"])
      inside = inside || (f->tid == l->tid && f->startUs <= l->startUs && l->endUs <= f->endUs);
    c.expect(inside, r + "layer " + l->name + " inside a stage Forward slice");
  }
  std::map<std::string, int> expectedLayers;
  for (const auto& name : kStageLayers.at(static_cast<size_t>(ppRank)))
    expectedLayers[name] = kWindowSteps * kMicrobatches;
  c.expect(layerCount == expectedLayers, r + "per-layer forward slices of the stage's layers");

  // Every layer's backward once per microbatch, inside a stage Backward slice (zero_bubble:
  // the layers' B inside the B slice; the first stage's first layer has none, its input
  // being the data, and its W is in the W slice).
  std::map<std::string, int> backwardCount;
  for (const TraceEvent* l : byPhase["Backward-SubModuleInternal"]) {
    ++backwardCount[l->name];
    bool inside = false;
    for (const TraceEvent* b : byPhase["Backward(post-forward)"])
      inside = inside || (b->name == stage && b->tid == l->tid && b->startUs <= l->startUs && l->endUs <= b->endUs);
    c.expect(inside, r + "layer " + l->name + " backward inside a " + stage + " Backward (B) slice");
  }
  std::map<std::string, int> expectedBackward = expectedLayers;
  if (split && ppRank == 0) expectedBackward.erase(kStageLayers[0][0]);
  c.expect(backwardCount == expectedBackward,
           r + "per-layer backward slices of the stage's layers, one per microbatch");

  // The pipeline track: what this stage receives (the waits) and sends, with peer and microbatch.
  const int peer = 1 - ppRank;  // pipeline rank
  std::map<std::string, std::multiset<std::pair<int64_t, int64_t>>> pipe;
  for (const TraceEvent* e : byPhase["Pipeline"]) {
    c.expect(e->tid == 5, r + e->name + " on the pipeline track");
    if (e->name == "wait sends") continue;
    c.expect(intArg(*e, "peer") == peer, r + e->name + " names its peer");
    c.expect(intArg(*e, "bytes") > 0, r + e->name + " names its bytes");
    pipe[e->name].insert({e->stepNum().value_or(-1), intArg(*e, "microbatch")});
  }
  const char* recv = ppRank == 0 ? "recv gradient" : "recv activation";
  const char* send = ppRank == 0 ? "send activation" : "send gradient";
  c.expect(pipe[recv] == every, r + recv + " per step and microbatch");
  c.expect(pipe[send] == every, r + send + " per step and microbatch");
  c.expect(pipe.size() == 2, r + "no other pipeline slices than its sends and receives");

  // Hybrid: the data-parallel reduction of this stage's gradients, once per step.
  const size_t waits = byPhase["AllReduceWait"].size(), buckets = byPhase["AllReduce"].size();
  c.expect(hybrid ? waits == kWindowSteps : waits == 0, r + "AllReduceWait slices: " + std::to_string(waits));
  c.expect(hybrid ? buckets >= kWindowSteps : buckets == 0, r + "AllReduce slices: " + std::to_string(buckets));
}

void checkProfiler(const std::string& dir, int worldSize, Checker& c) {
  const std::string root = dir + "/profiler-output";
  strata::profiler::TimelineReader reader(root);
  strata::testing::checkProfilerFiles(reader, root, worldSize, c);
  for (int rank = 0; rank < worldSize; ++rank) checkRank(reader, rank, worldSize > 2, c);
}

}  // namespace

int main(int argc, char** argv) {
  return strata::testing::trainThenCheck(
      argc, argv,
      [] {
        train();
        std::this_thread::sleep_for(std::chrono::milliseconds(400));  // a few system samples
      },
      checkProfiler);
}
