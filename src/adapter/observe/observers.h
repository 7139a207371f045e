// The process's step observers: a fan-out StepObserver that forwards every event to the
// registered ones, in registration order. Training code reports to observers() only.
//
// Registration: registerJobObservers() (called by the first DistributedModel) adds the
// profiler's observer and, when the job config has debugger collections, the debugger's;
// strata::finalize() removes them. Tests add their own (a recording observer).
//
// Threading: add/remove from any thread; events from the training thread and its autograd
// engine thread. Dispatch reads an immutable snapshot of the list (one atomic load, no
// reference counting: a forward that nobody observes costs a few nanoseconds), so an event
// never waits for a registration. Replaced lists are retired, not freed, until the process
// ends (registrations happen a few times per job). An observer that throws is logged once
// and skipped for that event; it never fails training.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "adapter/observe/step_observer.h"

namespace strata::observe {

class Observers final : public StepObserver {
 public:
  void add(std::shared_ptr<StepObserver> observer);
  // Removes `observer` (no-op when absent). Events already being dispatched may still
  // reach it: the retired list keeps it alive (until the process ends).
  void remove(const StepObserver* observer);
  size_t size() const { return snapshot().size(); }
  Observers();

  // Any observer times; its clock (-1 when none does).
  bool timing() const override;
  int64_t nowUs() const override;
  // The current time when some observer times, else -1.
  int64_t nowIfTiming() const;
  // Any observer's clock, timing or not (-1 without one): for events that belong to a step
  // already ended (the optimizer step after the last step of the profiler's window).
  int64_t clockUs() const;
  // What the forward of `model` should report (each observer asked once).
  Interest interest(const void* model);
  bool wantsLayerTensors(const void* model) override;
  bool wantsTensors() const override;

  void stepBegin(int64_t step, Mode mode, int64_t modeStep = -1) override;
  bool modelTiming() const override;
  void stepEnd(int64_t step) override;
  void parameters(const std::string& topClass, const NamedTensors& params) override;
  void loss(const torch::Tensor& loss) override;
  void gradients(const std::string& topClass, const NamedTensors& params) override;
  void optimizerStep(int64_t step, Span span) override;
  void batchRequested() override;
  void moduleInput(const std::string& path, const torch::Tensor& input) override;
  void moduleOutput(const std::string& path, const torch::Tensor& output) override;
  void layerForward(const std::string& path, Span span) override;
  void chainForward(const LayerChain& chain, Span span) override;
  void layerBackward(const std::string& path, Span span) override;
  void chainBackward(const std::string& topName, Span span) override;
  void gradientSync(Span wait, const std::vector<BucketRun>& buckets) override;
  void stageBackward(const StageWork& work) override;
  void transfer(const Transfer& transfer) override;
  void sendsWaited(Span span, int64_t sends) override;

 private:
  using List = std::vector<std::shared_ptr<StepObserver>>;
  const List& snapshot() const { return *list_.load(std::memory_order_acquire); }
  void publish(std::unique_ptr<List> next);
  template <typename Fn>
  void each(const char* event, Fn&& fn) const;

  std::mutex mu_;                                   // serialises add/remove
  std::vector<std::unique_ptr<const List>> lists_;  // every list published (retired ones too)
  std::atomic<const List*> list_{nullptr};
};

// The process-wide fan-out.
Observers& observers();

// A span from `startUs` (taken with nowIfTiming() or clockUs()) to now; {-1, 0} when
// startUs < 0.
Span spanSince(int64_t startUs);

// Registers the job's observers once per init/finalize cycle (the profiler's; the
// debugger's when the job config has collections) and their finalizers. Collective-free.
void registerJobObservers();

}  // namespace strata::observe
