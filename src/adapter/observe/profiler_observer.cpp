// The profiler as a step observer: every event becomes the smdebug-compatible timeline
// slice it always was (docs/profiler.md has the names, phases and tracks), recorded into the
// runtime's current profiler session.
#include <string>

#include "adapter/observe/job_observers.h"
#include "profiler/layer_timeline.h"
#include "profiler/session.h"

namespace strata::observe {
namespace {

using profiler::Track;
namespace phases = profiler::phases;

// The session while its timeline records, else nullptr.
profiler::Session* recording() {
  profiler::Session* s = profiler::current();
  return s != nullptr && s->timelineActive() ? s : nullptr;
}

std::string stageName(int stage) { return "stage " + std::to_string(stage); }

class ProfilerObserver final : public StepObserver {
 public:
  bool timing() const override { return recording() != nullptr; }
  bool modelTiming() const override {
    profiler::Session* s = profiler::current();
    return s != nullptr && s->recordsSteps();
  }
  int64_t nowUs() const override {
    profiler::Session* s = profiler::current();
    return s != nullptr ? s->nowUs() : -1;
  }

  void stepBegin(int64_t step, Mode mode, int64_t modeStep) override {
    if (profiler::Session* s = profiler::current()) s->stepBegin(step, mode, modeStep);
  }
  void stepEnd(int64_t step) override {
    if (profiler::Session* s = profiler::current()) s->stepEnd(step);
  }
  void optimizerStep(int64_t step, Span span) override {
    if (profiler::Session* s = profiler::current(); s != nullptr && span.startUs >= 0)
      s->recordForEndedStep(step, "step", phases::kOptimizer, Track::kCompute, span.startUs, span.durUs);
  }
  void batchRequested() override {
    if (profiler::Session* s = profiler::current()) s->batchRequested();
  }

  void layerForward(const std::string& path, Span span) override {
    slice(path, phases::kForwardSubmodule, Track::kCompute, span);
  }
  // The model's forward and backward are recorded at every step (smdebug's hook writes
  // them outside the detailed window too), and so are a pipeline stage's per microbatch (a
  // stage is its rank's model); layers and transfers only inside the window.
  void chainForward(const LayerChain& chain, Span span) override {
    profiler::Session* s = profiler::current();
    if (s == nullptr || span.startUs < 0) return;
    if (!chain.isStage) {
      s->recordModelSlice(chain.topName, phases::kForward, Track::kCompute, span.startUs, span.durUs);
      return;
    }
    s->recordModelSlice(chain.topName, phases::kForward, Track::kCompute, span.startUs, span.durUs,
                        {{"stage", chain.stage.stage},
                         {"chunk", chain.stage.chunk},
                         {"microbatch", chain.stage.microbatch},
                         {"step", chain.stage.step}});
  }
  void layerBackward(const std::string& path, Span span) override {
    slice(path, phases::kBackwardSubmodule, Track::kCompute, span);
  }
  void chainBackward(const std::string& topName, Span span) override {
    profiler::Session* s = profiler::current();
    if (s != nullptr && span.startUs >= 0)
      s->recordModelSlice(topName, phases::kBackward, Track::kCompute, span.startUs, span.durUs);
  }

  // The exposed wait on the compute track, and each bucket where it ran on the FIFO
  // communication thread (profiler/layer_timeline.h).
  void gradientSync(Span wait, const std::vector<BucketRun>& buckets) override {
    profiler::Session* s = recording();
    if (s == nullptr || wait.startUs < 0) return;
    s->recordSlice(phases::kAllReduceWait, phases::kAllReduceWait, Track::kCompute, wait.startUs, wait.durUs,
                   {{"buckets", static_cast<int64_t>(buckets.size())}});
    std::vector<profiler::CommRun> runs;
    std::vector<const BucketRun*> timed;
    for (const BucketRun& b : buckets) {
      if (b.launchUs < 0) continue;
      runs.push_back({b.launchUs, b.runUs});
      timed.push_back(&b);
    }
    const auto intervals = profiler::fifoRunIntervals(runs, wait.startUs + wait.durUs);
    for (size_t i = 0; i < intervals.size(); ++i)
      s->recordSlice("bucket " + std::to_string(timed[i]->index), phases::kAllReduce, Track::kCommunication,
                     intervals[i].startUs, intervals[i].durUs,
                     {{"bucket", static_cast<int64_t>(timed[i]->index)},
                      {"bytes", static_cast<int64_t>(timed[i]->bytes)}});
  }

  void stageBackward(const StageWork& w) override {
    profiler::Session* s = profiler::current();
    if (s == nullptr || w.span.startUs < 0) return;
    // zero_bubble: B is "stage <s>", W "stage <s> W" (the same phase and track).
    s->recordModelSlice(stageName(w.stage) + (w.weightGradients ? " W" : ""), phases::kBackward, Track::kCompute,
                        w.span.startUs, w.span.durUs,
                        {{"stage", w.stage},
                         {"chunk", w.chunk},
                         {"microbatch", w.microbatch},
                         {"step", w.step},
                         {"recomputed", w.recomputed},
                         {"weight_gradients", w.weightGradients}});
  }
  void transfer(const Transfer& t) override {
    profiler::Session* s = recording();
    if (s == nullptr || t.span.startUs < 0) return;
    s->recordSlice(transferName(t.kind), phases::kPipeline, Track::kPipeline, t.span.startUs, t.span.durUs,
                   {{"peer", t.peer}, {"microbatch", t.microbatch}, {"stage", t.stage}, {"bytes", t.bytes}});
  }
  void sendsWaited(Span span, int64_t sends) override {
    profiler::Session* s = recording();
    if (s == nullptr || span.startUs < 0) return;
    s->recordSlice("wait sends", phases::kPipeline, Track::kPipeline, span.startUs, span.durUs, {{"sends", sends}});
  }

 private:
  static void slice(const std::string& name, const char* phase, Track track, Span span) {
    profiler::Session* s = recording();
    if (s != nullptr && span.startUs >= 0) s->recordSlice(name, phase, track, span.startUs, span.durUs);
  }
};

}  // namespace

std::shared_ptr<StepObserver> makeProfilerObserver() { return std::make_shared<ProfilerObserver>(); }

}  // namespace strata::observe
