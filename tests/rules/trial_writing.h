// Writing a trial the way the debugger does, for the tests that read one back through the
// rules (the file adapters, the online rule thread).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "debugger/trial_writer.h"

namespace strata::rules::testing {

// Float values as the writer's tensor bytes (the returned owner keeps them alive).
inline debugger::TensorBytes bytesOf(std::vector<float> v) {
  auto owner = std::make_shared<std::vector<float>>(std::move(v));
  return debugger::TensorBytes{owner, owner->data(), owner->size() * sizeof(float)};
}

// A writer of worker_0's files in `dir` (no TensorBoard, no fsync) whose collections file
// names one collection, "losses" (the tensors matching "loss").
inline std::unique_ptr<debugger::TrialWriter> lossesTrialWriter(const std::string& dir) {
  debugger::TrialWriterOptions o;
  o.trialDir = dir;
  o.worker = "worker_0";
  o.tensorboard = false;
  o.durable = false;
  auto w = std::make_unique<debugger::TrialWriter>(o);
  w->writeCollections(R"({"collections": {"losses": {"name": "losses", "include_regex": ["loss"], "tensor_names": []}},
                          "_meta": {"num_workers": 1}})");
  return w;
}

// The writer's plan for a tensor saved as raw values.
inline debugger::TensorPlan rawValues() {
  debugger::TensorPlan plan;
  plan.raw = true;
  return plan;
}

}  // namespace strata::rules::testing
